package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// handWritten serves GET with the given stream (a server gone wrong:
// go-sdk's never sends these), and 404 to everything else.
func handWritten(contentType, stream string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, stream)
	}
}

// TestMalformedStream: a stream that is not an HTTP+SSE server's fails
// the client's initialize with an error saying what was wrong, and opens
// no session; detection does not take it for one either.
func TestMalformedStream(t *testing.T) {
	cases := []struct {
		name, contentType, stream, want string
	}{
		{"another origin", "text/event-stream", "event: endpoint\ndata: http://127.0.0.2:9/messages?s=1\n\n",
			"the endpoint event names http://127.0.0.2:9/messages?s=1, on another origin than http://127.0.0.1:"},
		{"another scheme", "text/event-stream", "event: endpoint\ndata: https://127.0.0.1/messages\n\n", "on another origin"},
		{"a message first", "text/event-stream", "event: message\ndata: {}\n\n", `its first event is "message", not "endpoint"`},
		{"unnamed first", "text/event-stream", "data: /messages\n\n", `its first event is "message", not "endpoint"`},
		{"no URI", "text/event-stream", "event: endpoint\ndata:  \n\n", "the endpoint event names no URI"},
		{"not a URI", "text/event-stream", "event: endpoint\ndata: http://[::1\n\n", "is not a URI"},
		{"ends at once", "text/event-stream", "", "it ended before its first event"},
		{"ends inside", "text/event-stream", "event: endpoint\ndata: /m", "it broke before its endpoint event: unexpected EOF"},
		{"not SSE", "text/html", "<html></html>", `Content-Type "text/html", not text/event-stream`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(handWritten(c.contentType, c.stream))
			t.Cleanup(srv.Close)
			b, _ := startBridge(t, srv.URL+"/sse", nil)
			cl := newClient(t, b)
			m := cl.initialize(map[string]any{})
			if m.Error == nil || !strings.Contains(m.Error.Message, c.want) || cl.sid != "" {
				t.Fatalf("initialize: %+v (session %q), want an error with %q", m.Error, cl.sid, c.want)
			}
			b.mu.Lock()
			owned := b.owned
			b.mu.Unlock()
			if owned != 0 {
				t.Errorf("%d sessions counted after a failed initialize", owned)
			}
			u, _ := url.Parse(srv.URL + "/sse")
			if d, err := Detect(t.Context(), http.DefaultTransport, u, nil); err != nil || d.Transport != "" {
				t.Errorf("Detect = %+v %v, want neither transport", d, err)
			}
		})
	}
}

// TestOversizedEvent: an event past MaxMessage ends the session (what
// follows it cannot be told apart from it): the call in flight fails
// saying so, and the session's next request gets 404.
func TestOversizedEvent(t *testing.T) {
	srv := sseServer(t)
	b, _ := startBridge(t, srv.URL+"/sse", func(o *Options) { o.MaxMessage = 1 << 10 })
	c := newClient(t, b)
	c.initialize(map[string]any{})                                                                     // a small answer
	resp := c.send(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) // a large one
	m := last(t, readAll(t, resp))
	if m.Error == nil || !strings.Contains(m.Error.Message, "the server sent an event larger than 1024 bytes") {
		t.Fatalf("an answer past the limit: %+v", m)
	}
	resp = c.send(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "ping"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the session's next request: HTTP %d, want 404", resp.StatusCode)
	}
}

// TestResolveEndpoint: relative URIs resolve against the SSE URL; another
// origin, or credentials, are refused.
func TestResolveEndpoint(t *testing.T) {
	base, _ := url.Parse("http://u:p@example.com/mcp/sse?x=1")
	ok := map[string]string{
		"/messages?sessionId=1":        "http://u:p@example.com/messages?sessionId=1",
		"messages?s=2":                 "http://u:p@example.com/mcp/messages?s=2",
		"?sessionid=3":                 "http://u:p@example.com/mcp/sse?sessionid=3",
		"http://EXAMPLE.com:80/m#frag": "http://EXAMPLE.com:80/m",
		"  /padded  ":                  "http://u:p@example.com/padded",
	}
	for in, want := range ok {
		got, err := ResolveEndpoint(base, in)
		if err != nil || got.String() != want {
			t.Errorf("ResolveEndpoint(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"//evil.example/m", "http://example.com:8080/m", "https://example.com/m", "http://x:y@example.com/m", ""} {
		if got, err := ResolveEndpoint(base, in); err == nil {
			t.Errorf("ResolveEndpoint(%q) = %v, want refused", in, got)
		}
	}
}

// FuzzEndpointStream: whatever a server sends, reading its stream's
// first event and then its messages never panics; an endpoint, when
// accepted, is on the SSE URL's origin; and every error is one the
// bridge can name.
func FuzzEndpointStream(f *testing.F) {
	f.Add([]byte("event: endpoint\ndata: /messages?sessionId=abc\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"))
	f.Add([]byte("event: endpoint\r\ndata: http://evil.example/m\r\n\r\n"))
	f.Add([]byte(": comment\n\nevent: endpoint\ndata: ?sessionid=x\n\ndata: [1,2]\n\n"))
	f.Add([]byte("data: x\ndata: y\n\n"))
	f.Add([]byte("event: endpoint\ndata: " + strings.Repeat("a", 300) + "\n\n"))
	base, _ := url.Parse("http://127.0.0.1:8080/sse")
	f.Fuzz(func(t *testing.T, stream []byte) {
		rd := mcpwire.NewReader(bytes.NewReader(stream), 256)
		u, err := firstEndpoint(rd, base)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if !sameOrigin(u, base) {
			t.Fatalf("accepted %s, not on %s", u, base)
		}
		b := &Bridge{}
		b.calls = b.newCallTable()
		s := &session{id: "s"}
		s.Caps, s.Ended = map[string]json.RawMessage{}, true
		for {
			ev, err := rd.Next()
			if err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, mcpwire.ErrTooLarge) {
					_ = streamEnd(err, 256)
					return
				}
				t.Fatalf("an error the bridge cannot name: %v", err)
			}
			b.dispatchData(s, ev.Data)
		}
	})
}
