package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// newGateway starts a gateway in front of upstreamURL and returns its MCP URL.
func newGateway(t *testing.T, upstreamURL string, mod func(*Config)) string {
	t.Helper()
	up, err := upstream.New(upstreamURL, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Upstream: up}
	if mod != nil {
		mod(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + cfg.withDefaults().Path
}

type wireError struct {
	ID    json.RawMessage `json:"id"`
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeError(t *testing.T, resp *http.Response) wireError {
	t.Helper()
	var we wireError
	if err := json.NewDecoder(resp.Body).Decode(&we); err != nil {
		t.Fatalf("decode error body: %v", err)
	}
	return we
}

func TestForwardsHeadersBothWays(t *testing.T) {
	var got http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Mcp-Session-Id", "sess-42")
		w.Header().Set("X-Upstream-Custom", "kept")
		w.Header().Set("Connection", "close, X-Hop")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"unknownField":{"deep":[1,2]}}}`)
	}))
	defer up.Close()
	gw := newGateway(t, up.URL+"/mcp", nil)

	sent := http.Header{
		"Mcp-Session-Id":       {"sess-42"},
		"Mcp-Protocol-Version": {"2025-11-25"},
		"Authorization":        {"Bearer secret"},
		"Last-Event-Id":        {"ev-7"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Method":           {"tools/call"},
		"Mcp-Name":             {"=?base64?SGVsbG8=?="},
		"Mcp-Param-Region":     {"us-west1"},
		"X-Unknown":            {"survives"},
		"Connection":           {"X-Drop-Me"},
		"X-Drop-Me":            {"hop-by-hop by Connection"},
		"Proxy-Authorization":  {"hop"},
	}
	resp := gwtest.Post(t, gw, "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","extra":true}}`, sent)
	for _, k := range []string{"Mcp-Session-Id", "Mcp-Protocol-Version", "Authorization", "Last-Event-Id", "Accept", "Mcp-Method", "Mcp-Name", "Mcp-Param-Region", "X-Unknown"} {
		if got.Get(k) != sent.Get(k) {
			t.Errorf("upstream got %s=%q, want %q", k, got.Get(k), sent.Get(k))
		}
	}
	for _, k := range []string{"X-Drop-Me", "Proxy-Authorization"} {
		if got.Get(k) != "" {
			t.Errorf("hop-by-hop header %s reached the upstream", k)
		}
	}
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("status = %d, want the upstream's 418", resp.StatusCode)
	}
	if resp.Header.Get("Mcp-Session-Id") != "sess-42" || resp.Header.Get("X-Upstream-Custom") != "kept" {
		t.Errorf("response headers not relayed: %v", resp.Header)
	}
	if resp.Header.Get("X-Hop") != "" {
		t.Errorf("hop-by-hop response header relayed")
	}
	body, _ := io.ReadAll(resp.Body)
	if !bytes.Contains(body, []byte(`"unknownField":{"deep":[1,2]}`)) {
		t.Errorf("body changed: %s", body)
	}
}

func TestSSEEventReachesClientBeforeUpstreamFinishes(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		select { // hold the stream open until the client has seen the event
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
	}))
	defer up.Close()
	defer close(release)
	gw := newGateway(t, up.URL, nil)

	// The upstream has not finished (it waits for release), so the headers
	// and the first event can only arrive if the gateway flushed them.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no response headers while the upstream was still running (buffered?): %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "notifications/progress") {
			return
		}
	}
	t.Fatalf("first SSE event not received while the upstream was still running (buffered?): %v", sc.Err())
}

func TestClientGoneCancelsUpstreamRequest(t *testing.T) {
	upstreamCtxDone := make(chan struct{})
	started := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		close(upstreamCtxDone)
	}))
	defer up.Close()
	gw := newGateway(t, up.URL, nil)

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`))
	req.Header.Set("Content-Type", "application/json")
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	<-started
	cancel()
	select {
	case <-upstreamCtxDone:
	case <-time.After(10 * time.Second):
		t.Fatal("upstream request still running after the client went away")
	}
}

func TestBadInput(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("bad input reached the upstream: %s %s", r.Method, r.URL)
	}))
	defer up.Close()
	gw := newGateway(t, up.URL, func(c *Config) { c.MaxBody = 1024 })

	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		code        int
		id          string
		msg         string
	}{
		{"not JSON", "application/json", `{"jsonrpc":`, 400, mcpwire.CodeParseError, "null", "not valid JSON"},
		{"empty body", "application/json", ``, 400, mcpwire.CodeParseError, "null", "empty"},
		{"garbage", "application/json", `hello`, 400, mcpwire.CodeParseError, "null", "not valid JSON"},
		{"JSON scalar", "application/json", `42`, 400, mcpwire.CodeInvalidRequest, "null", "JSON object"},
		{"wrong version", "application/json", `{"jsonrpc":"1.0","id":1,"method":"x"}`, 400, mcpwire.CodeInvalidRequest, "null", `"2.0"`},
		{"object id", "application/json", `{"jsonrpc":"2.0","id":{},"method":"x"}`, 400, mcpwire.CodeInvalidRequest, "null", "id must be"},
		{"method not a string", "application/json", `{"jsonrpc":"2.0","id":1,"method":7}`, 400, mcpwire.CodeInvalidRequest, "null", "wrong type"},
		{"empty method", "application/json", `{"jsonrpc":"2.0","id":3,"method":""}`, 400, mcpwire.CodeInvalidRequest, "3", "method is empty"},
		{"scalar params", "application/json", `{"jsonrpc":"2.0","id":"a","method":"x","params":5}`, 400, mcpwire.CodeInvalidRequest, `"a"`, "params"},
		{"neither", "application/json", `{"jsonrpc":"2.0","id":1}`, 400, mcpwire.CodeInvalidRequest, "null", "neither"},
		{"bad batch", "application/json", `[{"jsonrpc":"2.0"`, 400, mcpwire.CodeParseError, "null", "not valid JSON"},
		{"wrong content type", "text/plain", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 415, mcpwire.CodeInvalidRequest, "null", "application/json"},
		{"no content type", "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 415, mcpwire.CodeInvalidRequest, "null", "application/json"},
		{"too large", "application/json", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"p":"` + strings.Repeat("a", 2000) + `"}}`, 413, mcpwire.CodeInvalidRequest, "null", "1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := gwtest.Post(t, gw, tt.contentType, tt.body, nil)
			if resp.StatusCode != tt.status {
				t.Errorf("HTTP status = %d, want %d", resp.StatusCode, tt.status)
			}
			we := decodeError(t, resp)
			if we.Error.Code != tt.code {
				t.Errorf("code = %d, want %d (%s)", we.Error.Code, tt.code, we.Error.Message)
			}
			if string(we.ID) != tt.id {
				t.Errorf("id = %s, want %s", we.ID, tt.id)
			}
			if !strings.Contains(we.Error.Message, tt.msg) {
				t.Errorf("message %q does not say %q", we.Error.Message, tt.msg)
			}
		})
	}
}

func TestChunkedBodyOverLimit(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("oversized body reached the upstream")
	}))
	defer up.Close()
	gw := newGateway(t, up.URL, func(c *Config) { c.MaxBody = 100 })
	// An io.Reader that is not a *strings.Reader makes the client send
	// chunked, with no Content-Length to reject up front.
	body := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"p":"`), strings.NewReader(strings.Repeat("b", 500)+`"}}`))
	req, _ := http.NewRequest(http.MethodPost, gw, body)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d, want 413", resp.StatusCode)
	}
}

func TestUpstreamUnreachable(t *testing.T) {
	// A port that was free a moment ago: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	gw := newGateway(t, dead, nil)

	t.Run("POST request", func(t *testing.T) {
		resp := gwtest.Post(t, gw, "application/json", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, nil)
		we := decodeError(t, resp)
		if we.Error.Code != mcpwire.CodeInternalError || string(we.ID) != "9" {
			t.Errorf("got code %d id %s, want -32603 for id 9", we.Error.Code, we.ID)
		}
		for _, want := range []string{"the upstream", "unreachable", "connection refused"} {
			if !strings.Contains(we.Error.Message, want) {
				t.Errorf("message %q does not contain %q", we.Error.Message, want)
			}
		}
		if strings.Contains(we.Error.Message, strings.TrimPrefix(dead, "http://")) {
			t.Errorf("message %q names the upstream's address to the client", we.Error.Message)
		}
	})
	t.Run("POST notification", func(t *testing.T) {
		resp := gwtest.Post(t, gw, "application/json", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("status = %d, want 502", resp.StatusCode)
		}
	})
	t.Run("GET", func(t *testing.T) {
		resp, err := http.Get(gw)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("status = %d, want 502", resp.StatusCode)
		}
		we := decodeError(t, resp)
		if !strings.Contains(we.Error.Message, "the upstream is unreachable") || strings.Contains(we.Error.Message, dead) {
			t.Errorf("message %q: want it to say the upstream is unreachable, without its address", we.Error.Message)
		}
	})
	t.Run("readyz", func(t *testing.T) {
		resp, err := http.Get(strings.TrimSuffix(gw, "/mcp") + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("readyz = %d, want 503", resp.StatusCode)
		}
	})
}

func TestHealthAndReady(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
	gw := newGateway(t, up.URL, nil)
	base := strings.TrimSuffix(gw, "/mcp")
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s = %d, want 200", p, resp.StatusCode)
		}
	}
	resp, err := http.Get(base + "/elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path = %d, want 404", resp.StatusCode)
	}
}

func TestReadyReflectsStore(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	store := taskstore.New(rdb, taskstore.Options{})
	defer store.Close()
	mr.Close() // Redis goes away
	gw := newGateway(t, up.URL, func(c *Config) { c.Store = store })
	resp, err := http.Get(strings.TrimSuffix(gw, "/mcp") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(body, []byte("task store unavailable")) {
		t.Errorf("readyz = %d %s, want 503 naming the store", resp.StatusCode, body)
	}
}
