package sse

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// sseServer is go-sdk's HTTP+SSE server (MCP 2024-11-05 transport) with
// the test upstream's tools, at /sse.
func sseServer(t *testing.T) *httptest.Server {
	t.Helper()
	return sseServerWith(t, testupstream.Options{})
}

func sseServerWith(t *testing.T, opts testupstream.Options) *httptest.Server {
	t.Helper()
	s := testupstream.NewServer(opts)
	mux := http.NewServeMux()
	mux.Handle("/sse", mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// syncBuffer is a log sink safe for the bridge's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startBridge(t *testing.T, url string, set func(*Options)) (*Bridge, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	opts := Options{URL: url, Logger: zerolog.New(logs), InitTimeout: 20 * time.Second}
	if set != nil {
		set(&opts)
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	return b, logs
}

type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// client talks Streamable HTTP to the bridge, as the upstream client does.
type client struct {
	t   *testing.T
	b   *Bridge
	h   *http.Client
	sid string
}

func newClient(t *testing.T, b *Bridge) *client {
	return &client{t: t, b: b, h: &http.Client{Transport: b.Transport()}}
}

func (c *client) send(method string, v any) *http.Response {
	c.t.Helper()
	var body io.Reader
	if v != nil {
		body = bytes.NewReader(mustJSON(v))
	}
	req, _ := http.NewRequest(method, c.b.URL(), body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	resp, err := c.h.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return resp
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// readAll reads a response's messages: a JSON body, or an SSE stream's.
func readAll(t *testing.T, resp *http.Response) []msg {
	t.Helper()
	defer resp.Body.Close()
	var out []msg
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m msg
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("HTTP %d: not a JSON-RPC message: %v", resp.StatusCode, err)
		}
		return []msg{m}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m msg
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event data %q: %v", data, err)
			}
			out = append(out, m)
		}
	}
	return out
}

// initialize opens a session declaring caps; it returns the answer.
func (c *client) initialize(caps map[string]any) msg {
	c.t.Helper()
	resp := c.send(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": caps, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	sid := resp.Header.Get("Mcp-Session-Id")
	ms := readAll(c.t, resp)
	if len(ms) != 1 {
		c.t.Fatalf("initialize: %+v", ms)
	}
	if sid != "" {
		c.sid = sid
		r := c.send(http.MethodPost, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
		r.Body.Close()
		if r.StatusCode != http.StatusAccepted {
			c.t.Fatalf("notifications/initialized: HTTP %d", r.StatusCode)
		}
	}
	return ms[0]
}

// call calls tool name and returns every message of its answer stream.
func (c *client) call(id any, name string, args any, meta map[string]any) (*http.Response, []msg) {
	c.t.Helper()
	params := map[string]any{"name": name, "arguments": args}
	if meta != nil {
		params["_meta"] = meta
	}
	resp := c.send(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	return resp, readAll(c.t, resp)
}

// text is the first text content of a tools/call result.
func text(t *testing.T, m msg) string {
	t.Helper()
	if m.Error != nil {
		return "error: " + m.Error.Message
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("not a tool result: %s", m.Result)
	}
	return r.Content[0].Text
}

func last(t *testing.T, ms []msg) msg {
	t.Helper()
	if len(ms) == 0 {
		t.Fatal("no message")
	}
	return ms[len(ms)-1]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDetect: the 2025-03-26 detection tells go-sdk's HTTP+SSE server from
// its Streamable HTTP server, and says what it saw for a URL that is
// neither; an address nobody listens on is an error.
func TestDetect(t *testing.T) {
	old := sseServer(t)
	modern := httptest.NewServer(testupstream.Mux(testupstream.Options{}))
	t.Cleanup(modern.Close)
	stateless := httptest.NewServer(testupstream.Mux(testupstream.Options{Stateless: true}))
	t.Cleanup(stateless.Close)
	cases := []struct{ url, want, why string }{
		{old.URL + "/sse", SSE, "GET: an SSE stream"},
		{modern.URL + "/mcp", StreamableHTTP, "HTTP 200"},
		{stateless.URL + "/mcp", StreamableHTTP, "POST initialize"},
		{modern.URL + "/nothing", "", "POST initialize: HTTP 404"},
		{old.URL + "/nothing", "", "GET: HTTP 404"},
	}
	for _, c := range cases {
		u, _ := parseURL(c.url)
		d, err := Detect(context.Background(), http.DefaultTransport, u, nil)
		if err != nil || d.Transport != c.want || !strings.Contains(d.Why, c.why) {
			t.Errorf("Detect(%s) = %+v, %v; want %q (%q)", c.url, d, err, c.want, c.why)
		}
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	u, _ := parseURL(gone.URL + "/sse")
	if d, err := Detect(context.Background(), http.DefaultTransport, u, nil); err == nil {
		t.Errorf("Detect of a closed port = %+v, want an error", d)
	}
}

// TestTwoSessions: two client sessions, each on an SSE session of its
// own, call at once with the same request ids; each gets only its own
// answers, and the server saw two sessions.
func TestTwoSessions(t *testing.T) {
	srv := sseServer(t)
	b, _ := startBridge(t, srv.URL+"/sse", nil)
	a, z := newClient(t, b), newClient(t, b)
	for _, c := range []*client{a, z} {
		if init := c.initialize(map[string]any{}); init.Error != nil || !strings.Contains(string(init.Result), "testupstream") {
			t.Fatalf("initialize: %+v %s", init.Error, init.Result)
		}
	}
	if a.sid == z.sid {
		t.Fatal("both clients got one session")
	}
	b.mu.Lock()
	ea, ez := b.sessions[a.sid].endpoint.String(), b.sessions[z.sid].endpoint.String()
	b.mu.Unlock()
	if ea == ez {
		t.Fatalf("both sessions POST to %s", ea)
	}
	var wg sync.WaitGroup
	for i, c := range []*client{a, z} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 5 {
				want := fmt.Sprintf("client %d call %d", i, n)
				_, ms := c.call(7, "slow", map[string]any{"seconds": 0.05, "text": want}, nil) // one id for both
				if got := text(t, last(t, ms)); !strings.HasSuffix(got, want) || string(last(t, ms).ID) != "7" {
					t.Errorf("client %d got %q (id %s), want its own %q", i, got, last(t, ms).ID, want)
				}
			}
		}()
	}
	wg.Wait()
}

// TestLostStream: a lost SSE stream ends its session: the call in flight
// fails saying so, the next request gets 404 as from a restarted server,
// and a new initialize gets a working session.
func TestLostStream(t *testing.T) {
	srv := sseServer(t)
	b, logs := startBridge(t, srv.URL+"/sse", nil)
	c := newClient(t, b)
	c.initialize(map[string]any{})
	done := make(chan []msg, 1)
	// Short: go-sdk's SSE server lets a handler run on after its stream
	// went, and the test server's Close waits for it.
	go func() { _, ms := c.call(2, "slow", map[string]any{"seconds": 2}, nil); done <- ms }()
	waitFor(t, "the call in flight", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.calls.CallsLocked()) == 1
	})
	srv.CloseClientConnections() // the stream goes, as when the server restarts
	ms := <-done
	if got := text(t, last(t, ms)); !strings.Contains(got, "the upstream's HTTP+SSE session ended") {
		t.Fatalf("the call in flight got %q", got)
	}
	resp := c.send(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
	if m := readAll(t, resp); resp.StatusCode != http.StatusNotFound || m[0].Error == nil || m[0].Error.Code != -32001 {
		t.Fatalf("a request of the lost session: HTTP %d %+v", resp.StatusCode, m)
	}
	if !strings.Contains(logs.String(), "its client gets 404 and initializes again") {
		t.Errorf("the lost session is not logged:\n%s", logs)
	}
	c.sid = ""
	c.initialize(map[string]any{})
	if _, ms := c.call(4, "echo", map[string]any{"text": "again"}, nil); text(t, last(t, ms)) != "again" {
		t.Fatalf("after re-initialize: %+v", ms)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.owned != 1 || len(b.sessions) != 1 {
		t.Errorf("sessions counted %d, held %d; want 1 and 1", b.owned, len(b.sessions))
	}
}

// TestElicitationRelay: the server's elicitation/create during a call
// reaches its session's client on the call's stream under a bridge id; the
// client's answer goes back, and the tool's result uses it. Another
// session cannot answer it.
func TestElicitationRelay(t *testing.T) {
	srv := sseServer(t)
	b, _ := startBridge(t, srv.URL+"/sse", nil)
	c, other := newClient(t, b), newClient(t, b)
	c.initialize(map[string]any{"elicitation": map[string]any{}})
	other.initialize(map[string]any{"elicitation": map[string]any{}})
	resp := c.send(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": map[string]any{"name": "elicit", "arguments": map[string]any{}}})
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	nextMsg := func() msg {
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m msg
				if err := json.Unmarshal([]byte(data), &m); err != nil {
					t.Fatal(err)
				}
				return m
			}
		}
		t.Fatalf("the call's stream ended: %v", sc.Err())
		return msg{}
	}
	ask := nextMsg()
	if ask.Method != "elicitation/create" || !strings.Contains(string(ask.ID), "taskgate-sse-ask-") {
		t.Fatalf("first on the call's stream: %+v", ask)
	}
	answer := map[string]any{"jsonrpc": "2.0", "id": ask.ID, "result": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}
	if r := other.send(http.MethodPost, answer); r.StatusCode != http.StatusNotFound {
		t.Errorf("another session's answer: HTTP %d, want 404", r.StatusCode)
	}
	if r := c.send(http.MethodPost, answer); r.StatusCode != http.StatusAccepted {
		t.Fatalf("the answer: HTTP %d", r.StatusCode)
	}
	if m := nextMsg(); text(t, m) != "Hello, Ada!" || string(m.ID) != "5" {
		t.Fatalf("the tool's result: %+v", m)
	}
}

// TestProgressRouted: progress comes back with the client's own token on
// the call's stream.
func TestProgressRouted(t *testing.T) {
	srv := sseServer(t)
	b, _ := startBridge(t, srv.URL+"/sse", nil)
	c := newClient(t, b)
	c.initialize(map[string]any{})
	_, ms := c.call(2, "progress", map[string]any{"steps": 2}, map[string]any{"progressToken": "mine"})
	if len(ms) != 3 || ms[0].Method != "notifications/progress" || !strings.Contains(string(ms[0].Params), `"progressToken":"mine"`) {
		t.Fatalf("progress: %+v", ms)
	}
}

// TestDeleteEndsSession: DELETE ends the session upstream too (its
// stream closed); the id is then unknown.
func TestDeleteEndsSession(t *testing.T) {
	srv := sseServer(t)
	b, _ := startBridge(t, srv.URL+"/sse", nil)
	c := newClient(t, b)
	c.initialize(map[string]any{})
	if r := c.send(http.MethodDelete, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: HTTP %d", r.StatusCode)
	}
	r := c.send(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
	r.Body.Close()
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("after DELETE: HTTP %d", r.StatusCode)
	}
}

// TestBounds: --max-sessions refuses one more initialize, saying why;
// an idle session ends (its slot frees up).
func TestBounds(t *testing.T) {
	srv := sseServer(t)
	b, _ := startBridge(t, srv.URL+"/sse", func(o *Options) { o.MaxSessions = 1; o.SessionIdle = 300 * time.Millisecond })
	a, z := newClient(t, b), newClient(t, b)
	a.initialize(map[string]any{})
	if m := z.initialize(map[string]any{}); m.Error == nil || !strings.Contains(m.Error.Message, "limit of 1 HTTP+SSE sessions") || z.sid != "" {
		t.Fatalf("initialize past the limit: %+v (session %q)", m, z.sid)
	}
	waitFor(t, "the idle session to end", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.sessions) == 0 && b.owned == 0
	})
	if m := z.initialize(map[string]any{}); m.Error != nil || z.sid == "" {
		t.Fatalf("initialize once the idle one ended: %+v", m)
	}
}

// TestMaxPending: a session's calls in flight are bounded; one more is
// refused saying why, and the session goes on.
func TestMaxPending(t *testing.T) {
	srv := sseServer(t)
	b, _ := startBridge(t, srv.URL+"/sse", func(o *Options) { o.MaxPending = 1 })
	c := newClient(t, b)
	c.initialize(map[string]any{})
	done := make(chan string, 1)
	go func() {
		_, ms := c.call(2, "slow", map[string]any{"seconds": 0.5, "text": "first"}, nil)
		done <- text(t, last(t, ms))
	}()
	waitFor(t, "the first call in flight", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.calls.CallsLocked()) == 1
	})
	if _, ms := c.call(3, "echo", map[string]any{"text": "second"}, nil); !strings.Contains(text(t, last(t, ms)), "1 requests of this session are already in flight") {
		t.Fatalf("a call past the bound: %+v", ms)
	}
	if got := <-done; got != "slept 0.5 s: first" {
		t.Fatalf("the first call: %q", got)
	}
	if _, ms := c.call(4, "echo", map[string]any{"text": "third"}, nil); text(t, last(t, ms)) != "third" {
		t.Fatalf("a call once the first ended: %+v", ms)
	}
}

// TestProbe: Probe accepts go-sdk's HTTP+SSE endpoint, and says what
// came instead from a Streamable HTTP one; a closed port is unreachable.
func TestProbe(t *testing.T) {
	old := sseServer(t)
	modern := httptest.NewServer(testupstream.Mux(testupstream.Options{}))
	t.Cleanup(modern.Close)
	u, _ := parseURL(old.URL + "/sse")
	if unreachable, err := Probe(t.Context(), http.DefaultTransport, u, nil); err != nil || unreachable {
		t.Errorf("Probe(go-sdk SSE) = %v, %v", unreachable, err)
	}
	u, _ = parseURL(modern.URL + "/mcp")
	if unreachable, err := Probe(t.Context(), http.DefaultTransport, u, nil); err == nil || unreachable || !strings.Contains(err.Error(), "not an SSE stream") {
		t.Errorf("Probe(Streamable HTTP) = %v, %v", unreachable, err)
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	u, _ = parseURL(gone.URL + "/sse")
	if unreachable, err := Probe(t.Context(), http.DefaultTransport, u, nil); err == nil || !unreachable {
		t.Errorf("Probe(closed port) = %v, %v", unreachable, err)
	}
}

// TestAskOnGetStream: with two calls of a session in flight, the
// server's request (the HTTP+SSE transport does not say which call it
// belongs to) waits for the session's GET stream, comes on it once the
// client opens one, and the client's answer reaches the server.
func TestAskOnGetStream(t *testing.T) {
	rec := &testupstream.Recorder{}
	srv := sseServerWith(t, testupstream.Options{Recorder: rec})
	b, logs := startBridge(t, srv.URL+"/sse", nil)
	c := newClient(t, b)
	c.initialize(map[string]any{"elicitation": map[string]any{}})
	// A slow call beside it, cancelled at the end (the client leaves: the
	// bridge tells the server).
	ctx, cancel := context.WithCancel(context.Background())
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.URL(), bytes.NewReader(mustJSON(map[string]any{"jsonrpc": "2.0", "id": 2,
			"method": "tools/call", "params": map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 60}}})))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Session-Id", c.sid)
		if resp, err := c.h.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	waitFor(t, "the slow call in flight", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.calls.CallsLocked()) == 1
	})
	elicit := make(chan string, 1)
	go func() { _, ms := c.call(3, "elicit", map[string]any{}, nil); elicit <- text(t, last(t, ms)) }()
	waitFor(t, "the elicitation held for a GET stream", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.sessions[c.sid].Streams.HeldLocked() == 1
	})
	if !strings.Contains(logs.String(), "held until one opens") {
		t.Errorf("the held request is not logged")
	}
	ask := <-c.getStream()
	if ask.Method != "elicitation/create" {
		t.Fatalf("first on the GET stream: %+v", ask)
	}
	r := c.send(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": ask.ID, "result": map[string]any{"action": "accept", "content": map[string]any{"name": "Grace"}}})
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("the answer: HTTP %d", r.StatusCode)
	}
	if got := <-elicit; got != "Hello, Grace!" {
		t.Errorf("elicit: %q", got)
	}
	cancel()
	<-slowDone
	waitFor(t, "the slow call cancelled upstream", func() bool { return rec.Count("slow", testupstream.Cancelled) == 1 })
}

// getStream opens the session's GET stream; its messages arrive on the
// channel, which closes when the stream ends.
func (c *client) getStream() <-chan msg {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.b.URL(), nil)
	req.Header.Set("Mcp-Session-Id", c.sid)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.h.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET: %v %v", resp, err)
	}
	ch := make(chan msg, 16)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m msg
				if json.Unmarshal([]byte(data), &m) == nil {
					ch <- m
				}
			}
		}
	}()
	return ch
}

// TestAskBesideCompletionGoesToGetStream pins the routing of the server's
// question when the session's one call in flight is not one a server asks
// its questions for (mcpwire.CarriesUnrelated: tools/call, resources/read,
// prompts/get): a go-sdk HTTP+SSE server whose completion handler asks
// roots/list while completion/complete is in flight. The question goes to
// the session's GET stream, or waits for one, never onto the call's
// stream, which closes with its answer (a client's connect-time list lost
// roots/list that way: "the client's call ended before it answered").
func TestAskBesideCompletionGoesToGetStream(t *testing.T) {
	for _, stream := range []string{"open", "opened later"} {
		t.Run("GET stream "+stream, func(t *testing.T) {
			// A question never answered (the test failed) must not hold
			// the server's Close: the handler's wait ends with the test.
			testCtx, endTest := context.WithCancel(context.Background())
			s := mcp.NewServer(&mcp.Implementation{Name: "completes", Version: "1"}, &mcp.ServerOptions{
				CompletionHandler: func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
					ctx, cancel := context.WithCancel(ctx)
					defer context.AfterFunc(testCtx, cancel)()
					lr, err := req.Session.ListRoots(ctx, &mcp.ListRootsParams{})
					if err != nil {
						return nil, err
					}
					var uris []string
					for _, r := range lr.Roots {
						uris = append(uris, r.URI)
					}
					return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: uris}}, nil
				},
			})
			mux := http.NewServeMux()
			mux.Handle("/sse", mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			t.Cleanup(endTest) // before srv.Close
			b, _ := startBridge(t, srv.URL+"/sse", func(o *Options) { o.HoldAsk = time.Hour })
			c := newClient(t, b)
			c.initialize(map[string]any{"roots": map[string]any{}})
			var events <-chan msg
			if stream == "open" {
				events = c.getStream()
			}
			prompted := make(chan []msg, 1)
			go func() {
				prompted <- readAll(t, c.send(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 7, "method": "completion/complete",
					"params": map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "any"}, "argument": map[string]any{"name": "a", "value": ""}}}))
			}()
			if events == nil {
				waitFor(t, "roots/list held for a GET stream (not sent on the completion/complete in flight)", func() bool {
					b.mu.Lock()
					defer b.mu.Unlock()
					return b.sessions[c.sid].Streams.HeldLocked() == 1
				})
				events = c.getStream()
			}
			var m msg
			select {
			case m = <-events:
			case ms := <-prompted:
				t.Fatalf("completion/complete ended first, with %+v; roots/list not on the GET stream", ms)
			case <-time.After(20 * time.Second):
				t.Fatal("roots/list: nothing on the GET stream")
			}
			if m.Method != "roots/list" {
				t.Fatalf("first on the GET stream: %+v", m)
			}
			r := c.send(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"roots": []any{map[string]any{"uri": "file:///tmp/r", "name": "r"}}}})
			r.Body.Close()
			if r.StatusCode != http.StatusAccepted {
				t.Fatalf("the answer: HTTP %d", r.StatusCode)
			}
			ms := <-prompted
			if len(ms) != 1 || string(ms[0].ID) != "7" || !strings.Contains(string(ms[0].Result), "file:///tmp/r") {
				t.Fatalf("completion/complete's stream: %+v, want its answer alone, with the client's roots", ms)
			}
		})
	}
}
