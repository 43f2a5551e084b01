package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
)

// Kind is what a POSTed body holds.
type Kind int

const (
	KindRequest      Kind = iota + 1 // method and id
	KindNotification                 // method, no id
	KindResponse                     // result or error, and id
	KindBatch                        // a JSON array (2025-03-26 batching)
)

// Message is a POSTed JSON-RPC message. Only the envelope is decoded; Raw
// holds the bytes as received, so what is relayed keeps unknown fields.
type Message struct {
	Kind   Kind            `json:"-"`
	Raw    []byte          `json:"-"`
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	// Version is checked against "2.0".
	Version string `json:"jsonrpc"`

	routing routingCache // RoutingParams, decoded once
}

// MethodName returns the method, or "" for a response or batch.
func (m *Message) MethodName() string {
	if m.Method == nil {
		return ""
	}
	return *m.Method
}

// Parse decodes body as one JSON-RPC 2.0 message or a batch, with the
// precise error JSON-RPC prescribes for each way it can be wrong (HTTP 400
// with -32700 or -32600; the request's id kept when it could be read).
func Parse(body []byte) (*Message, *Error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, NewError(http.StatusBadRequest, CodeParseError, "Parse error: the request body is empty")
	}
	switch trimmed[0] {
	case '[':
		if !json.Valid(trimmed) {
			return nil, NewError(http.StatusBadRequest, CodeParseError, "Parse error: the request body is not valid JSON")
		}
		return &Message{Kind: KindBatch, Raw: body}, nil
	case '{':
	default:
		if json.Valid(trimmed) {
			return nil, NewError(http.StatusBadRequest, CodeInvalidRequest, "Invalid Request: a JSON-RPC message must be a JSON object")
		}
		return nil, NewError(http.StatusBadRequest, CodeParseError, "Parse error: the request body is not valid JSON")
	}
	m := &Message{Raw: body}
	if !scanEnvelope(trimmed, m) {
		*m = Message{Raw: body}
		if err := json.Unmarshal(trimmed, m); err != nil {
			return nil, envelopeError(err)
		}
	}
	return classify(m)
}

// envelopeError is the JSON-RPC error for a body json.Unmarshal refused.
func envelopeError(err error) *Error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return NewError(http.StatusBadRequest, CodeInvalidRequest, "Invalid Request: field "+typeErr.Field+" has the wrong type")
	}
	return NewError(http.StatusBadRequest, CodeParseError, "Parse error: the request body is not valid JSON")
}

// classify checks a decoded envelope and says what kind of message it is.
func classify(m *Message) (*Message, *Error) {
	if m.Version != "2.0" {
		return nil, NewError(http.StatusBadRequest, CodeInvalidRequest, `Invalid Request: "jsonrpc" must be "2.0"`)
	}
	hasID := len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null"))
	if hasID && m.ID[0] != '"' && !IsNumber(m.ID) {
		return nil, NewError(http.StatusBadRequest, CodeInvalidRequest, "Invalid Request: id must be a string or a number")
	}
	switch {
	case m.Method != nil:
		if *m.Method == "" {
			return nil, m.withID(NewError(http.StatusBadRequest, CodeInvalidRequest, "Invalid Request: method is empty"))
		}
		if len(m.Params) > 0 && m.Params[0] != '{' && m.Params[0] != '[' && !bytes.Equal(m.Params, []byte("null")) {
			return nil, m.withID(NewError(http.StatusBadRequest, CodeInvalidRequest, "Invalid Request: params must be an object"))
		}
		if hasID {
			m.Kind = KindRequest
		} else {
			m.Kind = KindNotification
		}
	case (len(m.Result) > 0 || len(m.Error) > 0) && hasID:
		m.Kind = KindResponse
	default:
		return nil, NewError(http.StatusBadRequest, CodeInvalidRequest, "Invalid Request: neither a request (method) nor a response (id with result or error)")
	}
	return m, nil
}

// withID remembers the request id on an error about a message whose id
// could be read, so the client can match the error to its request.
func (m *Message) withID(e *Error) *Error {
	if len(m.ID) > 0 {
		e.ID = m.ID
	}
	return e
}

// IsNumber reports whether b is a JSON number.
func IsNumber(b []byte) bool {
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

// RoutingParams are the members of a request's params that routing and
// the 2026-07-28 header checks read: _meta, and the values the Mcp-Name
// header mirrors (name, uri, taskId). InputResponses is only noted
// (RawMessage accepts any value, so it cannot fail the decode).
type RoutingParams struct {
	Meta           map[string]json.RawMessage `json:"_meta"`
	Name           *string                    `json:"name"`
	URI            *string                    `json:"uri"`
	TaskID         *string                    `json:"taskId"`
	InputResponses json.RawMessage            `json:"inputResponses"`
}

// routingCache is a message's params decoded as RoutingParams, once.
type routingCache struct {
	done bool
	src  []byte // the params decoded: a change of Params invalidates
	p    RoutingParams
	err  error
}

// RoutingParams decodes m.Params (the zero value when params are absent or
// null), once per message: a request is routed, validated and served from
// one decode.
func (m *Message) RoutingParams() (*RoutingParams, error) {
	c := &m.routing
	if c.done && sameBytes(c.src, m.Params) {
		return &c.p, c.err
	}
	*c = routingCache{done: true, src: m.Params}
	if len(m.Params) > 0 && string(m.Params) != "null" {
		c.err = json.Unmarshal(m.Params, &c.p)
	}
	return &c.p, c.err
}

// Meta returns params._meta as raw members (nil when absent or not an
// object). A clean RoutingParams decode has the same _meta; after any
// error the slow path answers, so malformed params are judged as Meta
// judges them.
func (m *Message) Meta() map[string]json.RawMessage {
	p, err := m.RoutingParams()
	if err != nil || len(m.Params) == 0 || string(m.Params) == "null" {
		return Meta(m.Params)
	}
	return p.Meta
}

// Meta returns params._meta as raw members (nil when absent or not an
// object).
func Meta(params json.RawMessage) map[string]json.RawMessage {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	return p.Meta
}

func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
