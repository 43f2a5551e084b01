package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// JSON-RPC and MCP error codes the gateway emits. The JSON-RPC 2.0 codes
// are from its specification; the MCP ones from the final 2026-07-28 schema
// (../shared/spec/schema-2026-07-28.ts), which wins over SEP prose.
const (
	codeParseError     = -32700 // body is not JSON
	codeInvalidRequest = -32600 // JSON, but not a JSON-RPC message
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603 // upstream or store failure
)

// rpcErr is a JSON-RPC error object, plus the HTTP status to send it with.
type rpcErr struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
	status  int
	id      json.RawMessage // the request's id when known at the point of failure
}

func (e *rpcErr) Error() string { return e.Message }

func newRPCErr(status, code int, msg string) *rpcErr {
	return &rpcErr{Code: code, Message: msg, status: status}
}

// rpcError is the one place an error becomes a JSON-RPC error. The message
// says what went wrong in the operator's terms; a Go error string is never
// the whole message.
func rpcError(err error) *rpcErr {
	var re *rpcErr
	var ue *upstream.UnreachableError
	switch {
	case errors.As(err, &re):
		return re
	case errors.Is(err, taskstore.ErrNotFound):
		// Another owner's task is "not found" too, never a hint it exists
		// (DESIGN.md invariant 3).
		return newRPCErr(http.StatusOK, codeInvalidParams, "Failed to retrieve task: Task not found")
	case errors.Is(err, taskstore.ErrExpired):
		return newRPCErr(http.StatusOK, codeInvalidParams, "Failed to retrieve task: Task has expired")
	case errors.Is(err, taskstore.ErrBadCursor):
		return newRPCErr(http.StatusOK, codeInvalidParams, "Invalid cursor: use a nextCursor from an earlier tasks/list")
	case errors.Is(err, taskstore.ErrTooMany):
		return newRPCErr(http.StatusOK, codeInternalError, "too many live tasks for this client: wait for some to finish, or cancel them")
	case errors.Is(err, taskstore.ErrUnavailable):
		return newRPCErr(http.StatusOK, codeInternalError, "task store unavailable: the gateway cannot reach Redis")
	case errors.As(err, &ue):
		// The request was fine; the hop behind us failed. HTTP 200 so the
		// client's call fails with this message while its session lives on.
		return newRPCErr(http.StatusOK, codeInternalError, ue.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return newRPCErr(http.StatusOK, codeInternalError, "the gateway timed out waiting for the upstream")
	default:
		return newRPCErr(http.StatusOK, codeInternalError, "internal gateway error: "+err.Error())
	}
}

// writeRPCError writes a JSON-RPC error response for request id (raw JSON;
// nil means null, as JSON-RPC requires when the id could not be read).
func writeRPCError(w http.ResponseWriter, id json.RawMessage, e *rpcErr) {
	if len(id) == 0 {
		id = e.id
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *rpcErr         `json:"error"`
	}{"2.0", id, e})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	status := e.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
