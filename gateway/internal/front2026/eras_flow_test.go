package front2026

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/testupstream"
)

type discoverResult struct {
	ResultType        string   `json:"resultType"`
	SupportedVersions []string `json:"supportedVersions"`
	Capabilities      struct {
		Tools      json.RawMessage            `json:"tools"`
		Tasks      json.RawMessage            `json:"tasks"`
		Logging    json.RawMessage            `json:"logging"`
		Extensions map[string]json.RawMessage `json:"extensions"`
	} `json:"capabilities"`
	TTLMs      *int64 `json:"ttlMs"`
	CacheScope string `json:"cacheScope"`
	Meta       struct {
		ServerInfo struct {
			Name string `json:"name"`
		} `json:"io.modelcontextprotocol/serverInfo"`
	} `json:"_meta"`
}

func Test2026Discover(t *testing.T) {
	for _, era := range upstreamEras {
		t.Run(era.Name, func(t *testing.T) {
			up := gwtest.NewEraUpstream(t, era.Stateless)
			rp := newReplicas(t, up.URL, 1, nil)
			for i := 0; i < 2; i++ {
				var d discoverResult
				gwtest.OKResult(t, gwtest.MPost(t, rp.urls[0], "server/discover", nil, gwtest.ModernMeta(), func(h http.Header) {
					h.Set("Authorization", "Bearer discover")
				}), &d)
				if d.ResultType != "complete" || d.TTLMs == nil || d.CacheScope == "" {
					t.Errorf("resultType %q ttlMs %v cacheScope %q: a DiscoverResult needs all three", d.ResultType, d.TTLMs, d.CacheScope)
				}
				if !slices.Contains(d.SupportedVersions, core.Version2026) || !slices.Contains(d.SupportedVersions, core.Version2025) {
					t.Errorf("supportedVersions = %v, want %s and %s", d.SupportedVersions, core.Version2026, core.Version2025)
				}
				if string(d.Capabilities.Extensions[core.TasksExtension]) != "{}" {
					t.Errorf("extensions = %v, want %s: {}", d.Capabilities.Extensions, core.TasksExtension)
				}
				if d.Capabilities.Tools == nil || d.Capabilities.Tasks != nil || d.Capabilities.Logging != nil {
					t.Errorf("capabilities tools=%s tasks=%s logging=%s, want the upstream's tools and no legacy tasks or logging",
						d.Capabilities.Tools, d.Capabilities.Tasks, d.Capabilities.Logging)
				}
				if d.Meta.ServerInfo.Name != testupstream.Implementation.Name {
					t.Errorf("serverInfo = %q, want the upstream's", d.Meta.ServerInfo.Name)
				}
			}
			// One era probe; a legacy upstream is initialized once (the held
			// session), not per discover.
			probes, inits := up.Posts("server/discover"), up.Posts("initialize")
			wantProbes, wantInits := 3, 0 // the probe, then both discovers forwarded
			if !era.Stateless {
				wantProbes, wantInits = 1, 1
			}
			if len(probes) != wantProbes || len(inits) != wantInits {
				t.Errorf("upstream saw %d server/discover and %d initialize, want %d and %d", len(probes), len(inits), wantProbes, wantInits)
			}
		})
	}
}

func Test2026Validation(t *testing.T) {
	up := gwtest.NewEraUpstream(t, true)
	gw := newReplicas(t, up.URL, 1, nil).urls[0]
	echoArgs := map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}
	without := func(key string) map[string]any {
		m := gwtest.ModernMeta()
		delete(m, key)
		return m
	}
	withMeta := func(key string, v any) map[string]any {
		m := gwtest.ModernMeta()
		m[key] = v
		return m
	}
	set := func(k, v string) func(http.Header) { return func(h http.Header) { h.Set(k, v) } }
	del := func(k string) func(http.Header) { return func(h http.Header) { h.Del(k) } }
	for _, tc := range []struct {
		name   string
		method string
		params map[string]any
		meta   map[string]any
		edit   func(http.Header)
		code   int
		status int
	}{
		{"no _meta, modern header", "tools/list", nil, nil, nil, mcpwire.CodeInvalidParams, 400},
		{"no protocolVersion in _meta", "tools/list", nil, without(core.MetaProtocolVersion), nil, mcpwire.CodeInvalidParams, 400},
		{"no clientCapabilities", "tools/list", nil, without(core.MetaClientCaps), nil, mcpwire.CodeInvalidParams, 400},
		{"clientCapabilities not an object", "tools/list", nil, withMeta(core.MetaClientCaps, "all"), nil, mcpwire.CodeInvalidParams, 400},
		{"clientInfo not an object", "tools/list", nil, withMeta(core.MetaClientInfo, 3), nil, mcpwire.CodeInvalidParams, 400},
		{"no MCP-Protocol-Version header", "tools/list", nil, gwtest.ModernMeta(), del("Mcp-Protocol-Version"), mcpwire.CodeHeaderMismatch, 400},
		{"version header disagrees", "tools/list", nil, withMeta(core.MetaProtocolVersion, "2099-01-01"), nil, mcpwire.CodeHeaderMismatch, 400},
		{"unsupported version", "tools/list", nil, withMeta(core.MetaProtocolVersion, "2099-01-01"), set("Mcp-Protocol-Version", "2099-01-01"), mcpwire.CodeUnsupportedVersion, 400},
		{"no Mcp-Method", "tools/list", nil, gwtest.ModernMeta(), del("Mcp-Method"), mcpwire.CodeHeaderMismatch, 400},
		{"Mcp-Method disagrees", "tools/list", nil, gwtest.ModernMeta(), set("Mcp-Method", "tools/call"), mcpwire.CodeHeaderMismatch, 400},
		{"no Mcp-Name on tools/call", "tools/call", echoArgs, gwtest.ModernMeta(), del("Mcp-Name"), mcpwire.CodeHeaderMismatch, 400},
		{"Mcp-Name disagrees", "tools/call", echoArgs, gwtest.ModernMeta(), set("Mcp-Name", "slow"), mcpwire.CodeHeaderMismatch, 400},
		{"Base64 Mcp-Name disagrees", "tools/call", echoArgs, gwtest.ModernMeta(), set("Mcp-Name", "=?base64?c2xvdw==?="), mcpwire.CodeHeaderMismatch, 400},
		{"Mcp-Name bad Base64", "tools/call", echoArgs, gwtest.ModernMeta(), set("Mcp-Name", "=?base64?%%%?="), mcpwire.CodeHeaderMismatch, 400},
		{"Mcp-Name on tasks/get disagrees", "tasks/get", map[string]any{"taskId": "t1"}, gwtest.ModernMeta(), set("Mcp-Name", "t2"), mcpwire.CodeHeaderMismatch, 400},
		{"initialize is legacy only", "initialize", nil, gwtest.ModernMeta(), nil, mcpwire.CodeMethodNotFound, 404},
		{"ping is gone", "ping", nil, gwtest.ModernMeta(), nil, mcpwire.CodeMethodNotFound, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.Posts(tc.method))
			resp := gwtest.MPost(t, gw, tc.method, tc.params, tc.meta, tc.edit)
			r := gwtest.OneReply(t, resp)
			if resp.StatusCode != tc.status || r.Error == nil || r.Error.Code != tc.code {
				t.Fatalf("HTTP %d, error %+v; want HTTP %d, code %d", resp.StatusCode, r.Error, tc.status, tc.code)
			}
			if string(r.ID) != "7" {
				t.Errorf("id = %s, want the request's", r.ID)
			}
			if tc.code == mcpwire.CodeUnsupportedVersion {
				var data struct {
					Supported []string `json:"supported"`
					Requested string   `json:"requested"`
				}
				if json.Unmarshal(r.Error.Data, &data) != nil || !slices.Contains(data.Supported, core.Version2026) || data.Requested != "2099-01-01" {
					t.Errorf("data = %s, want supported with %s and requested 2099-01-01", r.Error.Data, core.Version2026)
				}
			}
			if n := len(up.Posts(tc.method)); n != before {
				t.Errorf("the rejected request reached the upstream")
			}
		})
	}
	// A needlessly Base64-encoded Mcp-Name that matches is fine, and the
	// upstream gets it plain (go-sdk compares without decoding).
	var res struct {
		ResultType string `json:"resultType"`
		Content    []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	gwtest.OKResult(t, gwtest.MPost(t, gw, "tools/call", echoArgs, gwtest.ModernMeta(), set("Mcp-Name", "=?base64?ZWNobw==?=")), &res)
	if len(res.Content) != 1 || res.Content[0].Text != "hi" || res.ResultType != "complete" {
		t.Errorf("echo = %+v", res)
	}
	if calls := up.Posts("tools/call"); len(calls) != 1 || calls[0].Name != "echo" || calls[0].Session != "" {
		t.Errorf("upstream tools/call = %+v, want one, Mcp-Name echo, no session", calls)
	}
}

// Test2026ThroughBothEras: tools/list and sync tools/call of a modern
// client reach an upstream of either era and come back in the modern shape.
func Test2026ThroughBothEras(t *testing.T) {
	for _, era := range upstreamEras {
		t.Run(era.Name, func(t *testing.T) {
			up := gwtest.NewEraUpstream(t, era.Stateless)
			rp := newReplicas(t, up.URL, 2, nil)
			var tools struct {
				ResultType string `json:"resultType"`
				TTLMs      *int64 `json:"ttlMs"`
				CacheScope string `json:"cacheScope"`
				Tools      []any  `json:"tools"`
			}
			gwtest.OKResult(t, gwtest.MPost(t, rp.urls[0], "tools/list", nil, gwtest.ModernMeta(), nil), &tools)
			if tools.ResultType != "complete" || tools.TTLMs == nil || tools.CacheScope == "" || len(tools.Tools) != 8 {
				t.Errorf("tools/list = %+v, want 8 tools, resultType, ttlMs, cacheScope", tools)
			}
			for i, url := range rp.urls {
				var res struct {
					ResultType string `json:"resultType"`
					Content    []struct {
						Text string `json:"text"`
					} `json:"content"`
				}
				text := "héllo ✓"
				gwtest.OKResult(t, gwtest.MPost(t, url, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": text}}, gwtest.ModernMeta(), nil), &res)
				if res.ResultType != "complete" || len(res.Content) != 1 || res.Content[0].Text != text {
					t.Errorf("replica %d: echo = %+v", i, res)
				}
			}
			calls := up.Posts("tools/call")
			if len(calls) != 2 {
				t.Fatalf("upstream saw %d tools/call, want 2", len(calls))
			}
			if era.Stateless {
				for _, c := range calls {
					if c.Session != "" || c.Version != core.Version2026 {
						t.Errorf("modern upstream got session %q version %q", c.Session, c.Version)
					}
				}
				return
			}
			// Legacy: one held session, shared by both replicas, in Redis.
			if n := len(up.Posts("initialize")); n != 1 {
				t.Errorf("upstream initialized %d sessions, want 1", n)
			}
			held, err := rp.store.GetOwnerSession(context.Background(), "anonymous")
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range calls {
				if c.Session != held.SessionID || c.Version != held.ProtocolVersion || held.ProtocolVersion != core.Version2025 {
					t.Errorf("call on session %q version %q, want the held %q at %q", c.Session, c.Version, held.SessionID, held.ProtocolVersion)
				}
			}
		})
	}
}

// TestOwnerSessionReopenedOn404: a legacy upstream that forgot the held
// session (here: it restarted) gets a new one, transparently, and every
// replica moves to it.
func TestOwnerSessionReopenedOn404(t *testing.T) {
	up := gwtest.NewEraUpstream(t, false)
	rp := newReplicas(t, up.URL, 2, nil)
	auth := func(h http.Header) { h.Set("Authorization", "Bearer tenant-1") }
	call := func(url string) {
		t.Helper()
		var res struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		gwtest.OKResult(t, gwtest.MPost(t, url, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "ok"}}, gwtest.ModernMeta(), auth), &res)
		if len(res.Content) != 1 || res.Content[0].Text != "ok" {
			t.Fatalf("echo = %+v", res)
		}
	}
	call(rp.urls[0])
	call(rp.urls[1])
	owner := core.OwnerOf(&http.Request{Header: http.Header{"Authorization": {"Bearer tenant-1"}}})
	first, err := rp.store.GetOwnerSession(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	up.Swap(false) // a restarted upstream knows no session
	call(rp.urls[0])
	call(rp.urls[1])
	second, err := rp.store.GetOwnerSession(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	if second.SessionID == first.SessionID {
		t.Fatal("the held session was not replaced")
	}
	if n := len(up.Posts("initialize")); n != 2 {
		t.Errorf("upstream initialized %d sessions, want 2 (one reopen for both replicas)", n)
	}
	calls := up.Posts("tools/call")
	if last := calls[len(calls)-1]; last.Session != second.SessionID {
		t.Errorf("last call on %q, want the new session %q", last.Session, second.SessionID)
	}
	// Another owner has a session of its own.
	call2 := gwtest.MPost(t, rp.urls[0], "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}, gwtest.ModernMeta(),
		func(h http.Header) { h.Set("Authorization", "Bearer tenant-2") })
	if r := gwtest.OneReply(t, call2); r.Error != nil {
		t.Fatal(r.Error)
	}
	if n := len(up.Posts("initialize")); n != 3 {
		t.Errorf("upstream initialized %d sessions, want 3", n)
	}
}

// Test2026From2025UpstreamStreams: progress of a legacy upstream reaches a modern
// client on the response stream; an input request during a plain call is
// refused upstream, and the call ends instead of hanging.
func Test2026From2025UpstreamStreams(t *testing.T) {
	up := gwtest.NewEraUpstream(t, false)
	gw := newReplicas(t, up.URL, 1, nil).urls[0]
	meta := gwtest.ModernMeta()
	meta["progressToken"] = "p-1"
	resp := gwtest.MPost(t, gw, "tools/call", map[string]any{"name": "progress", "arguments": map[string]any{"steps": 3}}, meta, nil)
	var progress int
	var final gwtest.Reply
	gwtest.ReadMessages(t, resp, func(m gwtest.Reply) bool {
		if m.Method == "notifications/progress" {
			progress++
			if !strings.Contains(string(m.Params), `"progressToken":"p-1"`) {
				t.Errorf("progress params %s lack the client's token", m.Params)
			}
			return true
		}
		final = m
		return false
	})
	if progress != 3 || final.Error != nil || !strings.Contains(string(final.Result), `"done 3"`) || !strings.Contains(string(final.Result), `"resultType":"complete"`) {
		t.Errorf("progress %d, final %s %+v", progress, final.Result, final.Error)
	}

	start := time.Now()
	r := gwtest.OneReply(t, gwtest.MPost(t, gw, "tools/call", map[string]any{"name": "elicit"}, gwtest.ModernMeta(), nil))
	if time.Since(start) > 5*time.Second {
		t.Errorf("elicit took %v", time.Since(start))
	}
	// gwtest.ModernMeta declares no elicitation: the request is declined upstream
	// and never shown to the client.
	if r.Error != nil || !strings.Contains(string(r.Result), "elicitation declined") {
		t.Errorf("elicit during a plain call, client without elicitation = %s %+v, want the upstream's decline result", r.Result, r.Error)
	}
	// The upstream still serves the session.
	if r := gwtest.OneReply(t, gwtest.MPost(t, gw, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "after"}}, gwtest.ModernMeta(), nil)); r.Error != nil {
		t.Errorf("echo after the refusal: %+v", r.Error)
	}
	// A JSON-RPC error of the upstream keeps its code; a method it refuses
	// with a bare HTTP 400 (go-sdk: "JSON RPC not handled") is a 400.
	resp = gwtest.MPost(t, gw, "tools/call", map[string]any{"name": "rpcerror"}, gwtest.ModernMeta(), nil)
	if r := gwtest.OneReply(t, resp); r.Error == nil || r.Error.Code != testupstream.RPCErrorCode || resp.StatusCode != http.StatusOK {
		t.Errorf("rpcerror: HTTP %d %+v", resp.StatusCode, r.Error)
	}
	resp = gwtest.MPost(t, gw, "no/such", nil, gwtest.ModernMeta(), nil)
	if r := gwtest.OneReply(t, resp); r.Error == nil || r.Error.Code != mcpwire.CodeInvalidRequest || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown method: HTTP %d %+v", resp.StatusCode, r.Error)
	}
}

// TestUpstreamEraRedetected: an upstream that stops being modern is probed
// again on the first refusal, and the request goes the legacy way at once.
func TestUpstreamEraRedetected(t *testing.T) {
	up := gwtest.NewEraUpstream(t, true)
	rp := newReplicas(t, up.URL, 1, nil)
	list := func() {
		t.Helper()
		var tools struct {
			Tools []any `json:"tools"`
		}
		gwtest.OKResult(t, gwtest.MPost(t, rp.urls[0], "tools/list", nil, gwtest.ModernMeta(), nil), &tools)
		if len(tools.Tools) != 8 {
			t.Fatalf("tools/list has %d tools", len(tools.Tools))
		}
	}
	list()
	if era := rp.rs[0].Deps.Up.KnownEra(); era == nil || !era.Stateless {
		t.Fatalf("era = %+v, want modern", era)
	}
	up.Swap(false)
	list()
	if era := rp.rs[0].Deps.Up.KnownEra(); era == nil || era.Stateless {
		t.Fatalf("era = %+v, want legacy after the swap", era)
	}
	if n := len(up.Posts("initialize")); n != 1 {
		t.Errorf("initialize = %d, want the held session's", n)
	}
}

// TestGoSDKClient2026ThroughGateway: the go-sdk client at its default
// (2026-07-28) goes modern through the gateway in front of either era.
func TestGoSDKClient2026ThroughGateway(t *testing.T) {
	for _, era := range upstreamEras {
		t.Run(era.Name, func(t *testing.T) {
			up := gwtest.NewEraUpstream(t, era.Stateless)
			gw := newReplicas(t, up.URL, 1, nil).urls[0]
			cs, _ := gwtest.ConnectSDK(t, gw, "")
			if v := cs.InitializeResult().ProtocolVersion; v != core.Version2026 {
				t.Fatalf("negotiated %q, want %s", v, core.Version2026)
			}
			if si := cs.InitializeResult().ServerInfo; si == nil || si.Name != testupstream.Implementation.Name {
				t.Errorf("serverInfo = %+v", si)
			}
			gwtest.Echo(t, cs, "via the gateway")
			if !era.Stateless {
				return
			}
			// MRTR passes through a modern upstream untouched.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit"})
			if err != nil {
				t.Fatal(err)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "Hello, Ada!" {
				t.Errorf("elicit = %+v", res.Content[0])
			}
		})
	}
}

// TestOwnerSessionRace: replicas that open an owner's session at once agree
// on one; the losers close theirs and every call lands on the winner.
func TestOwnerSessionRace(t *testing.T) {
	up := gwtest.NewEraUpstream(t, false)
	rp := newReplicas(t, up.URL, 2, nil)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(url string) {
			defer wg.Done()
			resp := gwtest.MPost(t, url, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "race"}}, gwtest.ModernMeta(), nil)
			var m gwtest.Reply
			if err := gwtest.ScanMessages(resp, func(r gwtest.Reply) bool { m = r; return false }); err != nil || m.Error != nil {
				t.Errorf("call: %v %+v", err, m.Error)
			}
		}(rp.urls[i%2])
	}
	wg.Wait()
	held, err := rp.store.GetOwnerSession(context.Background(), "anonymous")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range up.Posts("tools/call") {
		if c.Session != held.SessionID {
			t.Errorf("a call went to session %q, not the held %q", c.Session, held.SessionID)
		}
	}
	inits, deletes := len(up.Posts("initialize")), len(up.Posts("DELETE"))
	if inits < 1 || inits > 2 || deletes != inits-1 {
		t.Errorf("%d initialize and %d DELETE, want one per replica at most and every loser closed", inits, deletes)
	}
}
