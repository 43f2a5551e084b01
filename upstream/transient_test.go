package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/upstream"
)

// TestTransient: every failure on the way is told from an answer of the
// server, through a real Call: refused, reset, 502/503/504, a session the
// server forgot are transient with their cause; a tool result with
// isError and a JSON-RPC error are final.
func TestTransient(t *testing.T) {
	ctx := context.Background()
	call := func(url string, s *upstream.Session) (*jsonrpc.Response, error) {
		c, err := upstream.New(url, upstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s == nil {
			s = &upstream.Session{}
		}
		return c.Call(ctx, s, toolCall(1, "echo", `{"text":"x"}`, ""), upstream.CallOptions{})
	}

	// Refused: a port nobody listens on any more.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/mcp"
	_ = ln.Close()
	// Reset: the server takes the request and drops the connection with RST.
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		_ = conn.(*net.TCPConn).SetLinger(0)
		_ = conn.Close()
	}))
	t.Cleanup(reset.Close)
	// Closed: the server takes the request and closes the connection
	// before any response (a process going away).
	closed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(closed.Close)
	status := func(code int) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, http.StatusText(code), code)
		}))
		t.Cleanup(s.Close)
		return s.URL + "/mcp"
	}
	for _, tc := range []struct {
		name, url string
		sess      *upstream.Session
		cause     string
	}{
		{"refused", refused, nil, upstream.CauseConnRefused},
		{"reset", reset.URL + "/mcp", nil, upstream.CauseConnReset},
		{"closed", closed.URL + "/mcp", nil, upstream.CauseConnReset},
		{"502", status(http.StatusBadGateway), nil, upstream.CauseBadGateway},
		{"503", status(http.StatusServiceUnavailable), nil, upstream.CauseUnavailable},
		{"504", status(http.StatusGatewayTimeout), nil, upstream.CauseGatewayTO},
		{"session gone", status(http.StatusNotFound), &upstream.Session{ID: "forgotten"}, upstream.CauseSessionGone},
		{"500 is no way failure", status(http.StatusInternalServerError), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := call(tc.url, tc.sess)
			if err == nil {
				t.Fatalf("answered %v, want an error", resp)
			}
			cause, ok := upstream.TransientAnswer(resp, err)
			if cause != tc.cause || ok != (tc.cause != "") {
				t.Errorf("TransientAnswer(%v) = %q, %v; want %q", err, cause, ok, tc.cause)
			}
		})
	}

	// The server's answers are final, whatever they say.
	c := start(t, testupstream.Options{})
	s := open(t, c)
	for _, tool := range []string{"fail", "rpcerror", "echo"} {
		resp, err := c.Call(ctx, s, toolCall(2, tool, `{"text":"x"}`, ""), upstream.CallOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if cause, ok := upstream.TransientAnswer(resp, err); ok {
			t.Errorf("%s's answer %s %v counted as transient (%s)", tool, resp.Result, resp.Error, cause)
		}
	}
	if _, ok := upstream.Transient(context.Canceled); ok {
		t.Error("a cancelled call counted as transient")
	}
	if _, ok := upstream.Transient(errors.New("anything")); ok {
		t.Error("an unknown error counted as transient")
	}
	// Only the stdio bridge's own marker makes a JSON-RPC error transient.
	exited := &jsonrpc.Response{Error: &jsonrpc.Error{Code: -32603, Message: "the upstream process exited with status 1", Data: upstream.ExitedData}}
	if cause, ok := upstream.TransientAnswer(exited, nil); !ok || cause != upstream.CauseProcessExited {
		t.Errorf("the bridge's exited answer: %q, %v", cause, ok)
	}
	other := &jsonrpc.Response{Error: &jsonrpc.Error{Code: -32603, Message: "boom", Data: json.RawMessage(`{"taskgate":"other"}`)}}
	if _, ok := upstream.TransientAnswer(other, nil); ok {
		t.Error("a server's -32603 with other data counted as transient")
	}
}
