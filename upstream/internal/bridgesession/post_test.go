package bridgesession

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/upstream"
)

// TestDispatch routes each kind of message to its handler, or answers it.
func TestDispatch(t *testing.T) {
	type sess struct{ id string }
	known := &sess{"s1"}
	cases := []struct {
		name, sid, body string
		ping            bool
		want            string // the handler called, or the status and body answered
	}{
		{"initialize", "", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, false, "initialize"},
		{"initialize naming a session", "nope", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, false, "initialize"},
		{"no session id", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false,
			`400 {"error":{"code":-32600,"message":"Bad Request: Mcp-Session-Id is required (initialize first)"},"id":1,"jsonrpc":"2.0"}`},
		{"unknown session", "nope", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false,
			`404 {"error":{"code":-32001,"message":"Session not found"},"id":1,"jsonrpc":"2.0"}`},
		{"answer", "s1", `{"jsonrpc":"2.0","id":7,"result":{}}`, false, "answer s1"},
		{"notification", "s1", `{"jsonrpc":"2.0","method":"notifications/cancelled"}`, false, "notification s1"},
		{"request", "s1", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, false, "request s1"},
		{"ping passed on", "s1", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, false, "request s1"},
		{"ping answered", "s1", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, true, `200 {"id":3,"jsonrpc":"2.0","result":{}}`},
		{"ping notification", "s1", `{"jsonrpc":"2.0","method":"ping"}`, true, "notification s1"},
		{"neither", "s1", `{"jsonrpc":"2.0"}`, false,
			`400 {"error":{"code":-32600,"message":"Invalid Request"},"id":null,"jsonrpc":"2.0"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var called string
			handler := func(name string) func(http.ResponseWriter, *http.Request, *sess, []byte, Envelope) {
				return func(_ http.ResponseWriter, _ *http.Request, s *sess, _ []byte, _ Envelope) {
					called = name + " " + s.id
				}
			}
			p := Post[*sess]{
				Initialize: func(http.ResponseWriter, *http.Request, []byte, Envelope) { called = "initialize" },
				Session: func(r *http.Request) *sess {
					if r.Header.Get("Mcp-Session-Id") == known.id {
						return known
					}
					return nil
				},
				Answer:       handler("answer"),
				Notification: handler("notification"),
				Request:      handler("request"),
				AnswersPing:  tc.ping,
			}
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			if tc.sid != "" {
				r.Header.Set("Mcp-Session-Id", tc.sid)
			}
			w := httptest.NewRecorder()
			body, env, ok := ReadPost(w, r, 1<<10, "too large", "the test bridge")
			if !ok {
				t.Fatalf("ReadPost refused %s: %d %s", tc.body, w.Code, w.Body)
			}
			Dispatch(w, r, body, env, p)
			got := called
			if got == "" {
				got = fmt.Sprintf("%d %s", w.Code, strings.TrimSpace(w.Body.String()))
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestRefuseSession names the limit of the reason, in the log line and the
// refusal, and tells the principal's Refused.
func TestRefuseSession(t *testing.T) {
	l := Limits{MaxSessions: 5, PerPrincipal: 2, What: "sessions of the test server", Op: "test"}
	for _, tc := range []struct {
		reason string
		limit  int
	}{{ReasonPerPrincipal, 2}, {ReasonMaxSessions, 5}} {
		var logs bytes.Buffer
		var heard string
		p := upstream.Principal{Key: "alice", Refused: func(reason, msg string) { heard = reason + ": " + msg }}
		w := httptest.NewRecorder()
		RefuseSession(w, zerolog.New(&logs), l, []byte("4"), p, tc.reason, 3*time.Second)
		msg := SessionMessage(tc.reason, l.What, tc.limit)
		if !strings.Contains(msg, fmt.Sprintf("limit of %d sessions of the test server", tc.limit)) {
			t.Fatalf("%s: message %q", tc.reason, msg)
		}
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"retryAfterMs":3000`) || !strings.Contains(w.Body.String(), `"reason":"`+tc.reason+`"`) ||
			!strings.Contains(w.Body.String(), `"id":4`) {
			t.Fatalf("%s: answered %d %s", tc.reason, w.Code, w.Body)
		}
		if heard != tc.reason+": "+msg {
			t.Fatalf("%s: Refused heard %q", tc.reason, heard)
		}
		want := `{"level":"debug","op":"test","reason":"` + tc.reason + `","limit":` + strconv.Itoa(tc.limit) + `,"message":"initialize refused"}`
		if strings.TrimSpace(logs.String()) != want {
			t.Fatalf("%s: logged %s, want %s", tc.reason, logs.String(), want)
		}
	}
}

// TestServeMethods routes by method, answers GET and DELETE of no session
// 404 and any other method 405.
func TestServeMethods(t *testing.T) {
	type sess struct{ Core[int] }
	known := &sess{}
	var mu sync.Mutex
	for _, tc := range []struct{ method, sid, want string }{
		{http.MethodPost, "", "post"},
		{http.MethodDelete, "s1", "delete"},
		{http.MethodDelete, "", "404 session not found"},
		{http.MethodGet, "nope", "404 session not found"},
		{http.MethodGet, "s1", "200 text/event-stream"},
		{http.MethodPut, "s1", "405 method not allowed, Allow: GET, POST, DELETE"},
	} {
		called := ""
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a GET stream ends as soon as it opens
		r := httptest.NewRequest(tc.method, "/", nil).WithContext(ctx)
		if tc.sid != "" {
			r.Header.Set("Mcp-Session-Id", tc.sid)
		}
		w := httptest.NewRecorder()
		ServeMethods(w, r, func(r *http.Request) *sess {
			if r.Header.Get("Mcp-Session-Id") == "s1" {
				return known
			}
			return nil
		}, &mu, func(http.ResponseWriter, *http.Request) { called = "post" },
			func(_ http.ResponseWriter, s *sess) {
				if s == known {
					called = "delete"
				}
			})
		got := called
		switch {
		case got != "":
		case w.Code == http.StatusOK:
			got = "200 " + w.Header().Get("Content-Type")
		case w.Header().Get("Allow") != "":
			got = fmt.Sprintf("%d %s, Allow: %s", w.Code, strings.TrimSpace(w.Body.String()), w.Header().Get("Allow"))
		default:
			got = fmt.Sprintf("%d %s", w.Code, strings.TrimSpace(w.Body.String()))
		}
		if got != tc.want {
			t.Errorf("%s (session %q): got %s, want %s", tc.method, tc.sid, got, tc.want)
		}
	}
}
