package core

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// ClientEra says which protocol the client that gets an error speaks: the
// HTTP status of a JSON-RPC error differs (mcpwire.StatelessStatus).
type ClientEra uint8

const (
	Era2025 ClientEra = iota // 2025-11-25 and older: sessions, errors with HTTP 200
	Era2026                  // 2026-07-28: stateless, errors with 400/404 by code
)

// RPCError is the one place an error becomes a JSON-RPC error, with its
// HTTP status for a client of era. The message says what went wrong in the
// operator's terms; a Go error string is never the whole message.
func RPCError(err error, era ClientEra) *mcpwire.Error {
	e := rpcError2025(err)
	if era == Era2026 {
		var se *upstream.StatusError
		if errors.As(err, &se) && se.Status >= 400 && se.Status < 500 {
			// How a session server refuses a request it cannot handle, or
			// credentials it does not accept: the status goes on.
			return mcpwire.NewError(se.Status, mcpwire.CodeInvalidRequest, "Invalid Request: "+se.Error())
		}
		return e.ForStateless()
	}
	return e
}

func rpcError2025(err error) *mcpwire.Error {
	var re *mcpwire.Error
	var ue *upstream.UnreachableError
	switch {
	case errors.As(err, &re):
		return re
	case errors.Is(err, taskstore.ErrNotFound):
		// Another owner's task is "not found" too, never a hint it exists
		// (docs/ARCHITECTURE.md invariant 3).
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "Failed to retrieve task: Task not found")
	case errors.Is(err, taskstore.ErrExpired):
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "Failed to retrieve task: Task has expired")
	case errors.Is(err, taskstore.ErrBadCursor):
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "Invalid cursor: use a nextCursor from an earlier tasks/list")
	case errors.Is(err, taskstore.ErrTooMany):
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, "too many live tasks for this client: wait for some to finish, or cancel them")
	case errors.Is(err, taskstore.ErrTooManyAnonymous):
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, "too many tasks of clients without Authorization right now: retry later, or send credentials")
	case errors.Is(err, taskstore.ErrTooManyFromAddress):
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, "too many tasks without Authorization from this address: wait for some to expire (10 minutes at most), or send credentials")
	case errors.Is(err, taskstore.ErrUnavailable):
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, "task store unavailable: the gateway cannot reach Redis")
	case errors.As(err, &ue):
		// The request was fine; the hop behind us failed. HTTP 200 so the
		// client's call fails with this message while its session lives on.
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, ue.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, "the gateway timed out waiting for the upstream")
	default:
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, "internal gateway error: "+err.Error())
	}
}

// InternalError is the JSON-RPC error object -32603 msg, as a task's
// stored error.
func InternalError(msg string) json.RawMessage {
	return mcpwire.MustMarshal(mcpwire.Error{Code: mcpwire.CodeInternalError, Message: msg})
}

// WriteStatelessError writes e for a 2026-07-28 client: an e built with
// status 200 (or none) gets the status its code calls for.
func WriteStatelessError(w http.ResponseWriter, id json.RawMessage, e *mcpwire.Error) {
	mcpwire.WriteError(w, id, e.ForStateless())
}

// TaskError maps a store error on a task operation for a client of era,
// logging what is not the client's doing.
func TaskError(log zerolog.Logger, err error, op, id string, era ClientEra) *mcpwire.Error {
	e := RPCError(err, era)
	// A request the client gave up on (context.Canceled) is no gateway
	// fault: nobody reads the answer, and it is not logged.
	if e.Code == mcpwire.CodeInternalError && !errors.Is(err, context.Canceled) {
		log.Warn().Str("op", op).Str("task_id", id).Err(err).Msg(e.Message)
	}
	return e
}
