package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/upstream"
)

func start(t *testing.T, opts testupstream.Options) *upstream.Client {
	t.Helper()
	srv := httptest.NewServer(testupstream.Handler(opts))
	t.Cleanup(srv.Close)
	c, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// initParams are the client capabilities a gateway declares upstream so the
// server may ask for input.
var initParams = json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}},"sampling":{},"roots":{}},"clientInfo":{"name":"taskgate-test","version":"0"}}`)

func open(t *testing.T, c *upstream.Client) *upstream.Session {
	t.Helper()
	ctx := context.Background()
	s, res, err := c.Initialize(ctx, nil, initParams)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if s.ID == "" || res.ProtocolVersion != "2025-11-25" {
		t.Fatalf("session %q version %q", s.ID, res.ProtocolVersion)
	}
	t.Cleanup(func() { _ = c.CloseSession(context.Background(), s) })
	return s
}

func id(v any) jsonrpc.ID {
	if n, ok := v.(int); ok {
		v = float64(n) // MakeID takes JSON's decoded form
	}
	i, err := jsonrpc.MakeID(v)
	if err != nil {
		panic(err)
	}
	return i
}

func toolCall(reqID any, name string, args string, meta string) *jsonrpc.Request {
	p := `{"name":"` + name + `","arguments":` + args
	if meta != "" {
		p += `,"_meta":` + meta
	}
	return &jsonrpc.Request{ID: id(reqID), Method: "tools/call", Params: json.RawMessage(p + "}")}
}

// text returns the first text content of a CallToolResult.
func text(t *testing.T, r *jsonrpc.Response) (string, bool) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("JSON-RPC error: %v", r.Error)
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("bad result %s: %v", r.Result, err)
	}
	return res.Content[0].Text, res.IsError
}

func TestCall(t *testing.T) {
	for _, jsonResp := range []bool{false, true} {
		name := "sse"
		if jsonResp {
			name = "json"
		}
		t.Run(name, func(t *testing.T) {
			c := start(t, testupstream.Options{JSONResponse: jsonResp})
			s := open(t, c)
			ctx := context.Background()
			r, err := c.Call(ctx, s, toolCall(1, "echo", `{"text":"hi there"}`, ""), upstream.CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := text(t, r); got != "hi there" {
				t.Errorf("echo = %q", got)
			}
			r, err = c.Call(ctx, s, toolCall("two", "fail", `{}`, ""), upstream.CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, isErr := text(t, r); !isErr || got != testupstream.FailText {
				t.Errorf("fail = %q isError=%v", got, isErr)
			}
			r, err = c.Call(ctx, s, toolCall(3, "rpcerror", `{}`, ""), upstream.CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var we *jsonrpc.Error
			if !errors.As(r.Error, &we) || we.Code != testupstream.RPCErrorCode {
				t.Errorf("rpcerror: got %v, want code %d", r.Error, testupstream.RPCErrorCode)
			}
		})
	}
}

func TestCallRelaysServerRequests(t *testing.T) {
	c := start(t, testupstream.Options{})
	callElicit(t, c, open(t, c))
}

// callElicit calls the elicit tool on s and answers the upstream's
// elicitation/create with a name: the call must end "Hello, Ada!" after
// that one request.
func callElicit(t *testing.T, c *upstream.Client, s *upstream.Session) {
	t.Helper()
	ctx := context.Background()
	var asked atomic.Int32
	r, err := c.Call(ctx, s, toolCall(7, "elicit", `{}`, ""), upstream.CallOptions{
		OnRequest: func(req *jsonrpc.Request) {
			if req.Method != "elicitation/create" {
				t.Errorf("server request %s, want elicitation/create", req.Method)
			}
			asked.Add(1)
			// Answer from another goroutine, as the worker will.
			go func() {
				err := c.Respond(ctx, s, &jsonrpc.Response{ID: req.ID,
					Result: json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)})
				if err != nil {
					t.Errorf("respond: %v", err)
				}
			}()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := text(t, r); got != "Hello, Ada!" || asked.Load() != 1 {
		t.Errorf("elicit = %q after %d requests", got, asked.Load())
	}
}

func TestCallRelaysNotifications(t *testing.T) {
	c := start(t, testupstream.Options{})
	s := open(t, c)
	var progress atomic.Int32
	r, err := c.Call(context.Background(), s, toolCall(8, "progress", `{"steps":4}`, `{"progressToken":"p1"}`), upstream.CallOptions{
		OnNotification: func(n *jsonrpc.Request) {
			if n.Method == "notifications/progress" {
				progress.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := text(t, r); !strings.Contains(got, "4") || progress.Load() != 4 {
		t.Errorf("progress = %q with %d notifications, want 4", got, progress.Load())
	}
}

func TestUnhandledServerRequestIsRefused(t *testing.T) {
	c := start(t, testupstream.Options{})
	s := open(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// With no OnRequest the client answers -32601 so the tool does not wait
	// forever; the tool turns that into some answer, and the call ends.
	if _, err := c.Call(ctx, s, toolCall(9, "elicit", `{}`, ""), upstream.CallOptions{}); err != nil {
		t.Fatalf("call did not end cleanly: %v", err)
	}
}

func TestSessionNotFound(t *testing.T) {
	c := start(t, testupstream.Options{})
	s := &upstream.Session{ID: "no-such-session", ProtocolVersion: "2025-11-25"}
	_, err := c.Call(context.Background(), s, toolCall(1, "echo", `{"text":"x"}`, ""), upstream.CallOptions{})
	if !errors.Is(err, upstream.ErrSessionNotFound) {
		t.Fatalf("err = %v, want ErrSessionNotFound", err)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	c, err := upstream.New(url, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(context.Background(), &upstream.Session{}, toolCall(1, "echo", `{}`, ""), upstream.CallOptions{})
	var ue *upstream.UnreachableError
	if !errors.Is(err, upstream.ErrUnreachable) || !errors.As(err, &ue) {
		t.Fatalf("err = %v, want an UnreachableError", err)
	}
	// The message is for clients: it names no address; the error keeps it
	// for logs.
	if want := "the upstream is unreachable: connection refused"; err.Error() != want || ue.URL != url {
		t.Errorf("message = %q (URL %q), want %q (URL %q)", err.Error(), ue.URL, want, url)
	}
}

// TestCredentialsNeverShown: a password in the upstream URL is used, and
// shown nowhere: not in URL(), errors, or parse errors.
func TestCredentialsNeverShown(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()
	raw := strings.Replace(srv.URL, "http://", "http://user:s3cret@", 1) + "/mcp"
	c, err := upstream.New(raw, upstream.Options{Header: http.Header{"X-Api-Key": {"k1"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(context.Background(), &upstream.Session{}, toolCall(1, "echo", `{}`, ""), upstream.CallOptions{})
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(c.URL(), "s3cret") {
		t.Errorf("err %v, URL %s: the password shows", err, c.URL())
	}
	if auth == "" {
		t.Error("the URL's credentials were not sent")
	}
	for _, bad := range []string{"ftp://u:s3cret@h/mcp", "http://u:s3cret@", "http://u:s3cret@h:99999999/%zz"} {
		if _, err := upstream.ParseURL(bad); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseURL(%q) = %v: the password shows", bad, err)
		}
	}
}

// TestOptionsHeader: Options.Header goes on every request, replacing the
// client's value.
func TestOptionsHeader(t *testing.T) {
	seen := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("X-Api-Key")
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	c, err := upstream.New(srv.URL+"/mcp", upstream.Options{Header: http.Header{"X-Api-Key": {"gateway"}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Forward(context.Background(), http.MethodPost, http.Header{"X-Api-Key": {"client"}}, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := c.Notify(context.Background(), &upstream.Session{}, "notifications/x", struct{}{}); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"Forward", "Notify"} {
		if got := <-seen; got != "gateway" {
			t.Errorf("%s sent X-Api-Key %q, want the configured one", what, got)
		}
	}
}

func TestParseURL(t *testing.T) {
	for _, bad := range []string{"", "ftp://x/mcp", "http://", "::nope", "localhost:3000/mcp"} {
		if _, err := upstream.ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) accepted a bad URL", bad)
		}
	}
	if _, err := upstream.ParseURL("https://mcp.example.com/mcp"); err != nil {
		t.Error(err)
	}
	// No scheme: the message names the fix.
	for in, want := range map[string]string{
		"127.0.0.1:3000/mcp":     "did you mean http://127.0.0.1:3000/mcp?",
		"localhost:3000/mcp":     "did you mean http://localhost:3000/mcp?",
		"u:s3cret@h:3000/mcp":    "did you mean http://xxxxx@h:3000/mcp?",
		"mcp.example.com/v1/mcp": "did you mean http://mcp.example.com/v1/mcp?",
	} {
		if _, err := upstream.ParseURL(in); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseURL(%q) = %v, want it to say %q", in, err, want)
		}
	}
}

func TestPathHint(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:3000":         "did you mean http://127.0.0.1:3000/mcp?",
		"http://u:s3cret@h:3000/":       "did you mean http://u:xxxxx@h:3000/mcp?",
		"https://mcp.example.com/v1":    "check the path of https://mcp.example.com/v1",
		"http://127.0.0.1:3000/mcp/sse": "check the path of http://127.0.0.1:3000/mcp/sse",
	} {
		if got := upstream.PathHint(in); !strings.HasPrefix(got, want) {
			t.Errorf("PathHint(%q) = %q, want %q…", in, got, want)
		}
	}
}

// TestObservationNotMCP: the observer is told which answers cannot be an
// MCP endpoint's: a POST's 404 without a session, 405, an HTML page.
func TestObservationNotMCP(t *testing.T) {
	for _, c := range []struct {
		name    string
		status  int
		ctype   string
		session string
		want    bool
	}{
		{"404 without a session", http.StatusNotFound, "text/plain", "", true},
		{"404 to a session", http.StatusNotFound, "text/plain", "s1", false},
		{"405", http.StatusMethodNotAllowed, "", "", true},
		{"404 with a JSON-RPC error", http.StatusNotFound, "application/json", "", false},
		{"html page", http.StatusOK, "text/html; charset=utf-8", "", true},
		{"json", http.StatusOK, "application/json", "", false},
		{"sse", http.StatusOK, "text/event-stream", "", false},
		{"empty 200", http.StatusOK, "", "", false},
		{"401", http.StatusUnauthorized, "application/json", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.ctype != "" {
					w.Header().Set("Content-Type", c.ctype)
				}
				w.WriteHeader(c.status)
			}))
			defer srv.Close()
			cl, err := upstream.New(srv.URL, upstream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got upstream.Observation
			cl.SetObserver(func(o upstream.Observation) { got = o })
			h := http.Header{"Content-Type": {"application/json"}}
			if c.session != "" {
				h.Set("Mcp-Session-Id", c.session)
			}
			resp, err := cl.Forward(context.Background(), http.MethodPost, h, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if (got.NotMCP != "") != c.want {
				t.Errorf("NotMCP = %q, want set: %t", got.NotMCP, c.want)
			}
		})
	}
}

// TestCallReusesConnections pins a fix: Call used to close an SSE body
// right after the response event, before the stream's end, so Go dropped
// the connection and every call dialled anew.
func TestCallReusesConnections(t *testing.T) {
	srv, dials := countingServer(t, testupstream.Handler(testupstream.Options{Stateless: true}), false)
	c, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &upstream.Session{ProtocolVersion: "2026-07-28"}
	before := dials.Load()
	for i := 0; i < 20; i++ {
		r, err := c.Call(context.Background(), s, toolCall(100+i, "echo", `{"text":"x"}`, modernMeta), upstream.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := text(t, r); got != "x" {
			t.Fatalf("echo = %q", got)
		}
	}
	if n := dials.Load() - before; n > 1 {
		t.Errorf("20 sequential calls opened %d new connections, want at most 1", n)
	}
}
