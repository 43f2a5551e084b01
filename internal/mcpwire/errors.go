package mcpwire

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// The JSON-RPC and MCP error codes taskgate sends. JSON-RPC 2.0 defines
// -32700 … -32603 and reserves -32000 … -32099 for implementations; the
// MCP 2026-07-28 schema assigns -32020 … -32022 (the final schema wins
// over SEP prose where they differ).
const (
	CodeParseError     = -32700 // the body is not JSON
	CodeInvalidRequest = -32600 // JSON, but not a JSON-RPC message
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603 // an upstream or store failure

	// CodeRateLimited refuses a poll that came too fast. Neither MCP
	// schema assigns a code to rate limiting: it is the first of
	// JSON-RPC's implementation-defined server errors.
	CodeRateLimited = -32000

	// CodeSessionNotFound goes with the 404 for an Mcp-Session-Id the
	// server does not hold (MCP 2025-11-25, Streamable HTTP, "Session
	// Management" names the status, no code): the code the MCP SDKs send,
	// so their clients recognise it.
	CodeSessionNotFound = -32001

	CodeHeaderMismatch     = -32020 // HTTP headers disagree with the body, or a required one is missing
	CodeMissingCapability  = -32021 // Missing Required Client Capability
	CodeUnsupportedVersion = -32022 // data: {supported, requested}
)

// Error is a JSON-RPC error object, with the HTTP status to send it with
// and, when known at the point of failure, the id of the request it
// answers.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
	// Status is the HTTP status; zero means 200.
	Status int `json:"-"`
	// ID is the request's id, when the error was found while parsing it.
	ID json.RawMessage `json:"-"`
}

// NewError returns an error with code and message, sent with status.
func NewError(status, code int, msg string) *Error {
	return &Error{Code: code, Message: msg, Status: status}
}

func (e *Error) Error() string { return e.Message }

// StatelessStatus is the HTTP status of a JSON-RPC error for a 2026-07-28
// client (SEP-2575; MCP 2026-07-28 Streamable HTTP transport): 404 for an
// unknown method, 400 for a request the server rejects as malformed, else
// 200.
func StatelessStatus(code int) int {
	switch code {
	case CodeMethodNotFound:
		return http.StatusNotFound
	case CodeParseError, CodeInvalidRequest, CodeInvalidParams, CodeHeaderMismatch, CodeMissingCapability, CodeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// ForStateless returns e with the status a 2026-07-28 client gets for its
// code, unless e was built with a status of its own (other than 200).
func (e *Error) ForStateless() *Error {
	if e.Status != 0 && e.Status != http.StatusOK {
		return e
	}
	c := *e
	c.Status = StatelessStatus(e.Code)
	return &c
}

// WriteError writes a JSON-RPC error response for request id (raw JSON;
// empty means e.ID, and null when that is empty too, as JSON-RPC requires
// when the id could not be read).
func WriteError(w http.ResponseWriter, id json.RawMessage, e *Error) {
	if len(id) == 0 {
		id = e.ID
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, err := json.Marshal(errorResponse{"2.0", id, e})
	if err != nil { // e.Data or id is not valid JSON: say so without them
		body, _ = json.Marshal(errorResponse{"2.0", json.RawMessage("null"),
			&Error{Code: CodeInternalError, Message: e.Message}})
	}
	status := e.Status
	if status == 0 {
		status = http.StatusOK
	}
	WriteBody(w, status, "application/json", body)
}

type errorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   *Error          `json:"error"`
}

// ErrorMessage is the JSON-RPC error response for id as bytes, for a
// stream (an SSE event) rather than a whole HTTP response.
func ErrorMessage(id json.RawMessage, e *Error) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(errorResponse{"2.0", id, e})
	if err != nil {
		b, _ = json.Marshal(errorResponse{"2.0", json.RawMessage("null"), &Error{Code: CodeInternalError, Message: e.Message}})
	}
	return b
}

// WriteBody writes a whole response: status, Content-Type, Content-Length
// and body.
func WriteBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
