package upstream

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A call to the upstream ends one of two ways for whoever decides whether
// to run it again (docs/durable.md):
//
//   - with an answer from the server: a tool result, even one with
//     isError, or a JSON-RPC error. That is the tool's outcome, final:
//     running the call again would only ask the same question twice;
//   - without one, because something on the way failed: the connection
//     was refused or reset, a proxy in front of the server answered 502,
//     503 or 504, the server no longer knows the session (404, it
//     restarted), or a stdio child exited under the call. Nothing says the
//     tool did not run, but nothing says what it answered either: a tool
//     that is safe to repeat may be run again.
//
// Transient tells the second kind apart and names its cause, a short
// fixed word fit for a metric label.

// Causes Transient names.
const (
	CauseConnRefused   = "connection_refused"
	CauseConnReset     = "connection_reset"
	CauseBadGateway    = "http_502"
	CauseUnavailable   = "http_503"
	CauseGatewayTO     = "http_504"
	CauseSessionGone   = "session_gone"
	CauseProcessExited = "process_exited"
)

// ExitedData is the data of the JSON-RPC error a stdio bridge answers a
// call with when its child exits under the call (upstream/stdio): the
// gateway's own answer, not the server's, so Transient may count it as a
// failure on the way. No server sends it: the member name is the
// gateway's.
var ExitedData = json.RawMessage(`{"taskgate":"upstream-process-exited"}`)

// Transient reports whether err, a Call's error, means the call failed on
// the way to or from the server (see above), and names the cause. A nil
// err, a cancelled context, a timeout, a refused TLS handshake or an
// answer that is not MCP are not transient.
func Transient(err error) (cause string, ok bool) {
	var se *StatusError
	switch {
	case err == nil:
		return "", false
	case errors.Is(err, ErrSessionNotFound):
		return CauseSessionGone, true
	case errors.Is(err, syscall.ECONNREFUSED):
		return CauseConnRefused, true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, ErrNoResponse),
		errors.Is(err, ErrUnreachable) && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		// A stream that broke before its answer, a connection closed
		// before the response: the server or something on the way
		// dropped the connection.
		return CauseConnReset, true
	case errors.As(err, &se):
		switch se.Status {
		case http.StatusBadGateway:
			return CauseBadGateway, true
		case http.StatusServiceUnavailable:
			return CauseUnavailable, true
		case http.StatusGatewayTimeout:
			return CauseGatewayTO, true
		}
	}
	return "", false
}

// TransientAnswer is Transient for a call's whole outcome: resp, an
// answer, is final unless it is the stdio bridge's answer for a child
// that exited (ExitedData).
func TransientAnswer(resp *jsonrpc.Response, err error) (cause string, ok bool) {
	if err != nil {
		return Transient(err)
	}
	var we *jsonrpc.Error
	if resp != nil && errors.As(resp.Error, &we) && isExited(we) {
		return CauseProcessExited, true
	}
	return "", false
}

// isExited reports whether e is the stdio bridge's exited answer.
func isExited(e *jsonrpc.Error) bool {
	if len(e.Data) == 0 {
		return false
	}
	var d struct {
		Taskgate string `json:"taskgate"`
	}
	return json.Unmarshal(e.Data, &d) == nil && d.Taskgate == "upstream-process-exited"
}
