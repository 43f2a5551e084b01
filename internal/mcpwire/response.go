package mcpwire

import (
	"encoding/json"
	"net/http"
)

// Response is a JSON-RPC response on the wire.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// Request is a JSON-RPC request or notification the gateway sends.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Notification returns the notification method(params) as bytes.
func Notification(method string, params json.RawMessage) []byte {
	return MustMarshal(Request{JSONRPC: "2.0", Method: method, Params: params})
}

// WriteJSON writes v as a whole JSON response with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		WriteError(w, nil, NewError(http.StatusInternalServerError, CodeInternalError, "cannot encode the answer: "+err.Error()))
		return
	}
	WriteBody(w, status, "application/json", body)
}

// WriteResult writes a JSON-RPC success response for request id: result is
// marshalled, or taken as it is when it is a json.RawMessage.
func WriteResult(w http.ResponseWriter, id json.RawMessage, result any) {
	raw, ok := result.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(result); err != nil {
			WriteError(w, id, NewError(http.StatusOK, CodeInternalError, "cannot encode the result: "+err.Error()))
			return
		}
		WriteMarshalled(w, id, raw)
		return
	}
	WriteJSON(w, http.StatusOK, Response{JSONRPC: "2.0", ID: id, Result: raw})
}

// WriteMarshalled answers with result as the JSON-RPC result of id, for a
// result that json.Marshal produced (compact, valid, HTML-escaped): the
// bytes are those WriteJSON(w, 200, Response{…}) writes, without
// marshalling result again. Other ids take that path itself.
func WriteMarshalled(w http.ResponseWriter, id json.RawMessage, result []byte) {
	if !plainID(id) {
		WriteJSON(w, http.StatusOK, Response{JSONRPC: "2.0", ID: id, Result: result})
		return
	}
	body := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(result))
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = append(body, id...)
	body = append(body, `,"result":`...)
	body = append(body, result...)
	body = append(body, '}')
	WriteBody(w, http.StatusOK, "application/json", body)
}

// plainID reports whether id is a JSON-RPC id that json.Marshal would
// write back unchanged: a number, or a string of printable ASCII without
// escapes or characters HTML-escaped (<, >, &).
func plainID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	if c := id[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
		return false
	}
	for _, c := range id {
		if c <= ' ' || c >= 0x7f || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
