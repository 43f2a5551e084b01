package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
)

// kind is what a POSTed body holds.
type kind int

const (
	kindRequest      kind = iota + 1 // method and id
	kindNotification                 // method, no id
	kindResponse                     // result or error, and id
	kindBatch                        // a JSON array (2025-03-26 batching), relayed as is
)

// message is a POSTed JSON-RPC message. Only the envelope is decoded; the
// raw bytes are what gets relayed, so unknown fields survive untouched.
type message struct {
	kind   kind
	raw    []byte
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	// Version is checked against "2.0".
	Version string `json:"jsonrpc"`
	// learn names the tool whose latency a forwarded tools/call teaches;
	// empty for every other message (latency.go).
	learn string
	// pcache is params decoded once for the modern front (fastpath.go).
	pcache paramsCache
}

// method returns the method name, or "" for a response or batch.
func (m *message) method() string {
	if m.Method == nil {
		return ""
	}
	return *m.Method
}

// parseMessage decodes body as one JSON-RPC 2.0 message or a batch, with
// the precise error JSON-RPC prescribes for each way it can be wrong.
func parseMessage(body []byte) (*message, *rpcErr) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, newRPCErr(http.StatusBadRequest, codeParseError, "Parse error: the request body is empty")
	}
	switch trimmed[0] {
	case '[':
		if !json.Valid(trimmed) {
			return nil, newRPCErr(http.StatusBadRequest, codeParseError, "Parse error: the request body is not valid JSON")
		}
		return &message{kind: kindBatch, raw: body}, nil
	case '{':
	default:
		if json.Valid(trimmed) {
			return nil, newRPCErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: a JSON-RPC message must be a JSON object")
		}
		return nil, newRPCErr(http.StatusBadRequest, codeParseError, "Parse error: the request body is not valid JSON")
	}
	m := &message{raw: body}
	if err := json.Unmarshal(trimmed, m); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, newRPCErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: field "+typeErr.Field+" has the wrong type")
		}
		return nil, newRPCErr(http.StatusBadRequest, codeParseError, "Parse error: the request body is not valid JSON")
	}
	if m.Version != "2.0" {
		return nil, newRPCErr(http.StatusBadRequest, codeInvalidRequest, `Invalid Request: "jsonrpc" must be "2.0"`)
	}
	hasID := len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null"))
	if hasID && m.ID[0] != '"' && !isNumber(m.ID) {
		return nil, newRPCErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: id must be a string or a number")
	}
	switch {
	case m.Method != nil:
		if *m.Method == "" {
			return nil, withID(newRPCErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: method is empty"), m)
		}
		if len(m.Params) > 0 && m.Params[0] != '{' && m.Params[0] != '[' && !bytes.Equal(m.Params, []byte("null")) {
			return nil, withID(newRPCErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: params must be an object"), m)
		}
		if hasID {
			m.kind = kindRequest
		} else {
			m.kind = kindNotification
		}
	case (len(m.Result) > 0 || len(m.Error) > 0) && hasID:
		m.kind = kindResponse
	default:
		return nil, newRPCErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: neither a request (method) nor a response (id with result or error)")
	}
	return m, nil
}

// withID remembers the request id on an error about a message whose id
// could be read, so the client can match the error to its request.
func withID(e *rpcErr, m *message) *rpcErr {
	if len(m.ID) > 0 {
		e.id = m.ID
	}
	return e
}

func isNumber(b []byte) bool {
	if plainInt(b) {
		return true // the common id, without a decode
	}
	var n json.Number
	return json.Unmarshal(b, &n) == nil
}

// plainInt reports whether b is -?(0|[1-9][0-9]*): a JSON number, so
// isNumber's decode would accept it.
func plainInt(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || (b[0] == '0' && len(b) > 1) {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
