package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// everythingPkg is the go-sdk's conformance server: a real 2026-07-28
// server over stdio (and older versions through initialize).
const everythingPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

// startStateless starts a bridge in front of the go-sdk's conformance
// server and checks that it was found to speak 2026-07-28.
func startStatelessBridge(t *testing.T) *Bridge {
	t.Helper()
	b, _ := startBridge(t, func(o *Options) { o.Command = []string{everythingBin} })
	if b.st == nil {
		t.Fatal("the bridge serves the 2026-07-28 conformance server with sessions; want stateless")
	}
	return b
}

// meta2026 is a 2026-07-28 request's _meta with client capabilities caps.
func meta2026(caps string) json.RawMessage {
	return json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`)
}

// post2026 POSTs one 2026-07-28 request (id 1) through the bridge's
// Transport, with the standard headers and extra ones.
func post2026(t *testing.T, ctx context.Context, b *Bridge, method string, params map[string]any, hdr map[string]string) *http.Response {
	t.Helper()
	if _, ok := params["_meta"]; !ok {
		params["_meta"] = meta2026(`{}`)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: b.Transport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// rpcAnswer is a JSON-RPC response as the tests read it.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// messages reads every JSON-RPC message of resp's body (JSON or SSE) until
// the response to the request, and returns them with that response last.
func messages(t *testing.T, resp *http.Response) []rpcAnswer {
	t.Helper()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var a rpcAnswer
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		return []rpcAnswer{a}
	}
	var out []rpcAnswer
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var a rpcAnswer
		if err := json.Unmarshal([]byte(data), &a); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		out = append(out, a)
		if a.Method == "" {
			return out
		}
	}
	t.Fatalf("the stream ended without an answer (%v); got %d messages", sc.Err(), len(out))
	return nil
}

func answer(t *testing.T, resp *http.Response) rpcAnswer {
	t.Helper()
	ms := messages(t, resp)
	return ms[len(ms)-1]
}

func TestStatelessProbe(t *testing.T) {
	// A session server (the test server speaks 2025-11-25 at most) keeps
	// the session path: initialize works, and its answer names the bridge's
	// session.
	legacy, _ := startBridge(t, nil)
	if legacy.st != nil {
		t.Fatal("a 2025-11-25 child is served statelessly")
	}
	b := startStatelessBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := post2026(t, ctx, b, "server/discover", map[string]any{}, nil)
	a := answer(t, resp)
	var d struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if resp.StatusCode != 200 || a.Error != nil || json.Unmarshal(a.Result, &d) != nil || !strings.Contains(strings.Join(d.SupportedVersions, ","), "2026-07-28") {
		t.Fatalf("server/discover: %d %s %+v", resp.StatusCode, a.Result, a.Error)
	}
	if string(a.ID) != "1" {
		t.Errorf("answer id %s, want the client's 1", a.ID)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequestWithContext(ctx, m, URL, nil)
		resp, err := (&http.Client{Transport: b.Transport()}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405", m, resp.StatusCode)
		}
	}
	// With --upstream-shared the one child serves every client
	// statelessly: an initialize is refused as 2026-07-28 refuses it.
	shared, _ := startBridge(t, func(o *Options) { o.Command, o.Shared = []string{everythingBin}, true })
	resp = post2026(t, ctx, shared, "initialize", map[string]any{}, nil)
	if a := answer(t, resp); resp.StatusCode != 404 || a.Error == nil || a.Error.Code != -32601 {
		t.Errorf("initialize on a shared stateless child: %d %+v, want 404 -32601", resp.StatusCode, a.Error)
	}
}

// A 2025-11-25 client in front of a child that speaks 2026-07-28 gets a
// session with a child of its own, initialized at its version (issue 37):
// the child's log messages reach it on its call's stream, its elicitation
// comes to it as a request it answers, and 2026-07-28 requests of no
// session still go to the stateless child meanwhile.
func TestStatelessChildSessionsFor2025Clients(t *testing.T) {
	b := startStatelessBridge(t)
	if !b.PerSession() {
		t.Fatal("PerSession false: sessions of 2025-11-25 clients could not follow their child across replicas")
	}
	c := &client{t: t, h: &http.Client{Transport: b.Transport()}}
	resp := c.post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{"elicitation": map[string]any{}},
		"clientInfo": map[string]any{"name": "t", "version": "1"}}})
	c.sid = resp.Header.Get("Mcp-Session-Id")
	ms := readAll(t, resp)
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if c.sid == "" || len(ms) != 1 || json.Unmarshal(ms[0].Result, &init) != nil || init.ProtocolVersion != "2025-11-25" {
		t.Fatalf("initialize: session %q, %+v", c.sid, ms)
	}
	b.mu.Lock()
	s := b.sessions[c.sid]
	b.mu.Unlock()
	if s == nil || s.proc == nil || s.proc.version != "2025-11-25" {
		t.Fatalf("the session has no child of its own at 2025-11-25: %+v", s)
	}
	c.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}).Body.Close()
	readAll(t, c.post(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": map[string]any{"level": "debug"}}))

	ms = readAll(t, c.post(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{"name": "test_tool_with_logging", "arguments": map[string]any{}}}))
	logs := 0
	for _, m := range ms {
		if m.Method == "notifications/message" {
			logs++
		}
	}
	if last := ms[len(ms)-1]; logs == 0 || string(last.ID) != "3" || last.Result == nil {
		t.Fatalf("test_tool_with_logging: %d log messages on its stream, answer %+v; want them before the answer", logs, last)
	}

	var asked bool
	var result msg
	each(t, c.post(map[string]any{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": map[string]any{"name": "test_elicitation",
		"arguments": map[string]any{"message": "name?"}}}), func(m msg) bool {
		switch {
		case m.Method == "elicitation/create":
			asked = true
			c.answer(m, map[string]any{"action": "accept", "content": map[string]any{"username": "ada", "email": "ada@example.com"}})
		case m.Method == "":
			result = m
			return false
		}
		return true
	})
	if !asked || string(result.ID) != "4" || result.Result == nil {
		t.Fatalf("test_elicitation: asked %v, answer %+v", asked, result)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if a := answer(t, post2026(t, ctx, b, "server/discover", map[string]any{}, nil)); a.Error != nil || a.Result == nil {
		t.Fatalf("a 2026-07-28 request beside the session: %+v", a.Error)
	}
	del := c.send(http.MethodDelete, nil)
	del.Body.Close()
	if del.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d", del.StatusCode)
	}
	select {
	case <-s.proc.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the session's child did not stop with its session")
	}
}

// Concurrent requests with the same client id each get their own answer:
// the bridge's ids keep them apart on the child's one stdin.
func TestStatelessConcurrentIDs(t *testing.T) {
	b := startStatelessBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan string, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			uri := "test://static-text"
			if i%2 == 1 {
				uri = "test://static-binary"
			}
			resp := post2026(t, ctx, b, "resources/read", map[string]any{"uri": uri}, map[string]string{"Mcp-Name": uri})
			a := answer(t, resp)
			if string(a.ID) != "1" || !strings.Contains(string(a.Result), uri) {
				errs <- "resources/read " + uri + ": id " + string(a.ID) + " result " + string(a.Result)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// An InputRequiredResult reaches the client as the server wrote it (no
// request on the stream), and the retry with inputResponses completes.
func TestStatelessMRTR(t *testing.T) {
	b := startStatelessBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	caps := map[string]string{"Mcp-Name": "test_input_required_result_elicitation"}
	params := func() map[string]any {
		return map[string]any{"name": "test_input_required_result_elicitation", "arguments": map[string]any{}, "_meta": meta2026(`{"elicitation":{}}`)}
	}
	ms := messages(t, post2026(t, ctx, b, "tools/call", params(), caps))
	if len(ms) != 1 {
		t.Fatalf("round 1: %d messages before the answer, want none: %+v", len(ms)-1, ms)
	}
	var r1 struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	}
	if err := json.Unmarshal(ms[0].Result, &r1); err != nil || r1.ResultType != "input_required" || r1.InputRequests["user_name"] == nil {
		t.Fatalf("round 1: %s, want input_required asking user_name", ms[0].Result)
	}
	p := params()
	p["inputResponses"] = map[string]any{"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}
	a := answer(t, post2026(t, ctx, b, "tools/call", p, caps))
	if !strings.Contains(string(a.Result), "Hello, Ada!") {
		t.Fatalf("round 2: %s %+v", a.Result, a.Error)
	}
}

// A capability error keeps its code and gets the status a 2026-07-28
// client expects (400).
func TestStatelessMissingCapability(t *testing.T) {
	b := startStatelessBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := post2026(t, ctx, b, "tools/call", map[string]any{"name": "test_missing_capability", "arguments": map[string]any{}},
		map[string]string{"Mcp-Name": "test_missing_capability"})
	a := answer(t, resp)
	if resp.StatusCode != 400 || a.Error == nil || a.Error.Code != -32021 || !strings.Contains(string(a.Data()), "sampling") {
		t.Fatalf("%d %+v, want 400 -32021 naming sampling", resp.StatusCode, a.Error)
	}
}

func (a rpcAnswer) Data() json.RawMessage {
	if a.Error == nil {
		return nil
	}
	return a.Error.Data
}

// Mcp-Param-* headers are checked against the tool's x-mcp-header
// annotations, as the server checks them over HTTP.
func TestStatelessParamHeaders(t *testing.T) {
	b := startStatelessBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name   string
		args   map[string]any
		header string // Mcp-Param-Region; "" none
		ok     bool
	}{
		{"match", map[string]any{"region": "us-west1"}, "us-west1", true},
		{"base64 match", map[string]any{"region": "Hello"}, "=?base64?SGVsbG8=?=", true},
		{"no prefix is literal", map[string]any{"region": "SGVsbG8="}, "SGVsbG8=", true},
		{"absent both", map[string]any{"level": 3}, "", true},
		{"mismatch", map[string]any{"region": "us-west1"}, "eu-west1", false},
		{"missing", map[string]any{"region": "us-west1"}, "", false},
		{"unpadded base64", map[string]any{"region": "Hello"}, "=?base64?SGVsbG8?=", false},
		{"bad base64", map[string]any{"region": "Hello"}, "=?base64?SGVs!!!bG8=?=", false},
		{"header for absent argument", map[string]any{"level": 3}, "us-west1", false},
	} {
		hdr := map[string]string{"Mcp-Name": "test_x_mcp_header"}
		if tc.header != "" {
			hdr["Mcp-Param-Region"] = tc.header
		}
		resp := post2026(t, ctx, b, "tools/call", map[string]any{"name": "test_x_mcp_header", "arguments": tc.args}, hdr)
		a := answer(t, resp)
		switch {
		case tc.ok && (resp.StatusCode != 200 || a.Error != nil):
			t.Errorf("%s: %d %+v, want the tool's answer", tc.name, resp.StatusCode, a.Error)
		case !tc.ok && (resp.StatusCode != 400 || a.Error == nil || a.Error.Code != -32020):
			t.Errorf("%s: %d %s %+v, want 400 -32020", tc.name, resp.StatusCode, a.Result, a.Error)
		}
	}
}

// A listen is acknowledged under the client's id, and gets the child's
// list changes tagged with it; closing it ends the subscription.
func TestStatelessListen(t *testing.T) {
	b := startStatelessBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lctx, lcancel := context.WithCancel(ctx)
	resp := post2026(t, lctx, b, "subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": true}}, nil)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("listen: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := make(chan rpcAnswer, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var a rpcAnswer
				_ = json.Unmarshal([]byte(data), &a)
				events <- a
			}
		}
	}()
	next := func(method string) rpcAnswer {
		t.Helper()
		select {
		case a := <-events:
			var p struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			}
			_ = json.Unmarshal(a.Params, &p)
			if a.Method != method || string(p.Meta["io.modelcontextprotocol/subscriptionId"]) != "1" {
				t.Fatalf("got %s %s, want %s tagged with the client's id 1", a.Method, a.Params, method)
			}
			return a
		case <-ctx.Done():
			t.Fatalf("no %s on the listen stream", method)
		}
		return rpcAnswer{}
	}
	next("notifications/subscriptions/acknowledged")
	call := post2026(t, ctx, b, "tools/call", map[string]any{"name": "test_trigger_tool_change", "arguments": map[string]any{}},
		map[string]string{"Mcp-Name": "test_trigger_tool_change"})
	if a := answer(t, call); a.Error != nil {
		t.Fatalf("test_trigger_tool_change: %+v", a.Error)
	}
	next("notifications/tools/list_changed")
	lcancel()
	for range events {
	}
	waitFor(t, "the listen call to end", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.calls.CallsLocked()) == 0
	})
}

// A child that gives the probe no answer, or exits, is served with
// sessions; the probe does not hold the start longer than its timeout.
func TestStatelessProbeFallback(t *testing.T) {
	for name, cmd := range map[string][]string{
		"silent": {"sh", "-c", "exec sleep 30"},
		"exits":  {"true"},
	} {
		t.Run(name, func(t *testing.T) {
			logs := &logBuf{}
			b, err := Start(Options{Command: cmd, InitTimeout: 300 * time.Millisecond, Logger: zerolog.New(logs)})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = b.Close(ctx)
			}()
			if b.st != nil {
				t.Fatal("served statelessly")
			}
			if !strings.Contains(logs.String(), "does not speak 2026-07-28") {
				t.Errorf("no log line says why: %s", logs.String())
			}
		})
	}
}

// A 2026-07-28 child that dies fails its requests in flight, is restarted
// and probed again, and serves the next requests.
func TestStatelessRestart(t *testing.T) {
	b := startStatelessBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, _ := b.st.child()
	p.kill("the test killed it")
	<-p.exited
	waitFor(t, "the restarted child", func() bool {
		q, _ := b.st.child()
		return q != nil && q != p && b.Ready(ctx) == nil
	})
	resp := post2026(t, ctx, b, "tools/call", map[string]any{"name": "test_simple_text", "arguments": map[string]any{}},
		map[string]string{"Mcp-Name": "test_simple_text"})
	if a := answer(t, resp); a.Error != nil || !strings.Contains(string(a.Result), "text") {
		t.Fatalf("after the restart: %d %s %+v", resp.StatusCode, a.Result, a.Error)
	}
}

// TestStatelessUntaggedNotification: the 2026-07-28 child serves every
// client at once, so a notification that names no request of its own (a
// log line of client A's call, read after A's answer, while B's call is
// the one in flight) reaches no client; one that names a request (its
// subscriptionId) reaches that request, under the client's id.
func TestStatelessUntaggedNotification(t *testing.T) {
	b := startStatelessBridge(t)
	p, err := b.st.child()
	if err != nil {
		t.Fatal(err)
	}
	// B's call in flight, as send registers it.
	bCall := b.calls.NewCall(b.st.sess, p, json.RawMessage(`"b-1"`), "tools/call")
	b.calls.Add(bCall)
	t.Cleanup(func() { b.calls.Drop(bCall) })
	b.st.dispatch(p, []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"A's late log line"}}`))
	select {
	case m := <-bCall.Out:
		t.Fatalf("an untagged notification went to the one call in flight: %s", m)
	default:
	}
	b.st.dispatch(p, []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"x","_meta":{"io.modelcontextprotocol/subscriptionId":`+bCall.Key+`}}}`))
	select {
	case m := <-bCall.Out:
		if !strings.Contains(string(m), `"io.modelcontextprotocol/subscriptionId":"b-1"`) {
			t.Fatalf("a tagged notification: %s; want it under the client's id", m)
		}
	default:
		t.Fatal("a notification naming the call did not reach it")
	}
}
