package front2025

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

func TestInitializeStripsClientTasksCapability(t *testing.T) {
	up := &spy{next: testupstream.Handler(testupstream.Options{JSONResponse: true})}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	rp := newReplicas(t, upSrv.URL+"/mcp", 1, nil)

	resp := rawPost(t, rp.urls[0], "", "2025-11-25", `{"jsonrpc":"2.0","id":"i-1","method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{"tasks":{"list":{},"requests":{"elicitation":{"create":{}}}},"elicitation":{"form":{}},"x-custom":{"k":1}},`+
		`"clientInfo":{"name":"raw","version":"0"},"x-param":true}}`)
	r := gwtest.OneReply(t, resp)
	if r.Error != nil || resp.Header.Get("Mcp-Session-Id") == "" || string(r.ID) != `"i-1"` {
		t.Fatalf("initialize: %+v %s", r.Error, r.Result)
	}
	reqs := up.requests()
	if len(reqs) > 0 && reqs[0].rpcMethod == "server/discover" {
		reqs = reqs[1:] // the era probe (internal/upstreamside/era.go), before the first initialize
	}
	got := reqs[0]
	if got.rpcMethod != "initialize" || got.version != "" {
		t.Errorf("upstream got %s with MCP-Protocol-Version %q, want initialize without the header", got.rpcMethod, got.version)
	}
	var sent struct {
		Params struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
			XParam       bool                       `json:"x-param"`
		} `json:"params"`
	}
	_ = json.Unmarshal(got.body, &sent)
	caps := sent.Params.Capabilities
	if _, ok := caps["tasks"]; ok || caps["elicitation"] == nil || string(caps["x-custom"]) != `{"k":1}` || !sent.Params.XParam {
		t.Errorf("upstream initialize body = %s", got.body)
	}
	// The record keeps what the client declared.
	rec, err := rp.store.GetSession(context.Background(), resp.Header.Get("Mcp-Session-Id"))
	if err != nil || !strings.Contains(string(rec.ClientCapabilities), `"tasks"`) {
		t.Errorf("record = %+v, %v", rec, err)
	}
}

func TestInitializeOlderClientUntouched(t *testing.T) {
	upSrv := httptest.NewServer(testupstream.Handler(testupstream.Options{JSONResponse: true}))
	t.Cleanup(upSrv.Close)
	rp := newReplicas(t, upSrv.URL+"/mcp", 1, gwtest.Rules(t, "*", policy.Task))

	cs, cap := gwtest.ConnectSDK(t, rp.urls[0], "2025-06-18")
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-06-18" {
		t.Fatalf("protocolVersion = %q", v)
	}
	if strings.Contains(string(cap.InitAnswer(t).Result), `"tasks"`) {
		t.Errorf("tasks capability offered to a 2025-06-18 client: %s", cap.InitAnswer(t).Result)
	}
	gwtest.Echo(t, cs, "plain")
	if keys := rp.mr.Keys(); len(keys) != 0 {
		t.Errorf("Redis keys for a pass-through session: %v", keys)
	}
	// tools/list is relayed byte for byte.
	direct := gwtest.OneReply(t, rawPost(t, upSrv.URL, cs.ID(), "2025-06-18", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	via := gwtest.OneReply(t, rawPost(t, rp.urls[0], cs.ID(), "2025-06-18", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	if string(direct.Result) != string(via.Result) || strings.Contains(string(via.Result), "taskSupport") {
		t.Errorf("tools/list changed for a pass-through session:\n%s\n%s", direct.Result, via.Result)
	}
}

func TestInitializeStoreDown(t *testing.T) {
	up := &spy{next: testupstream.Handler(testupstream.Options{})}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	rp := newReplicas(t, upSrv.URL+"/mcp", 1, nil)
	rp.mr.Close()

	resp := rawPost(t, rp.urls[0], "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	r := gwtest.OneReply(t, resp)
	if r.Error == nil || r.Error.Code != mcpwire.CodeInternalError || !strings.HasPrefix(r.Error.Message, "task store unavailable") || string(r.ID) != "1" {
		t.Fatalf("initialize with Redis down: %+v %s", r.Error, r.Result)
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		t.Errorf("the client learned session %q that no replica knows", sid)
	}
	// The upstream session nobody can use was closed.
	var deleted bool
	for _, s := range up.requests() {
		deleted = deleted || (s.httpMethod == http.MethodDelete && s.version == "2025-11-25")
	}
	if !deleted {
		t.Error("the orphaned upstream session was not closed")
	}
}

// fakeToolsUpstream answers initialize (session "fake-1", version v) and a
// two-page tools/list whose tools exercise every rule, as JSON or SSE (with
// a notification before the response).
func fakeToolsUpstream(t *testing.T, v string, sse bool) *httptest.Server {
	pages := map[string]string{
		"": `{"tools":[` +
			`{"name":"opt_a","inputSchema":{"type":"object"},"x-extra":{"k":1}},` +
			`{"name":"sync_b","execution":{"taskSupport":"optional","other":1}},` +
			`{"name":"sync_c","execution":{"taskSupport":"required"}},` +
			`{"name":"req_d","execution":{"taskSupport":"optional"}},` +
			`{"name":"plain_e","x-first":0,"execution":{"taskSupport":"optional"}},` +
			`{"name":"plain_f","description":"d"}` +
			`],"nextCursor":"p2","x-result":[1]}`,
		"p2": `{"tools":[{"name":"opt_g","execution":{}}],"_meta":{"m":1}}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		var result string
		switch m.Method {
		case "initialize":
			result = `{"protocolVersion":"` + v + `","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`
		case "tools/list":
			result = pages[m.Params.Cursor]
		default:
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Mcp-Session-Id", "fake-1")
		msg := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`
		if !sse {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, msg)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"hi\"}}\n\n")
		io.WriteString(w, "event: message\nid: 42\ndata: "+msg+"\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestToolsListRewrite(t *testing.T) {
	rs := gwtest.Rules(t, "sync_*", policy.Sync, "req_*", policy.TaskRequired, "opt_*", policy.Task)
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[sse], func(t *testing.T) {
			upSrv := fakeToolsUpstream(t, "2025-11-25", sse)
			rp := newReplicas(t, upSrv.URL, 2, rs)
			c := &gwtest.Client{T: t, URLs: rp.urls[:1]}
			init := rawPost(t, rp.urls[0], "", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
			if r := gwtest.OneReply(t, init); !strings.Contains(string(r.Result), `"tasks"`) {
				t.Fatalf("initialize: %+v %s", r.Error, r.Result)
			}
			c.SID = init.Header.Get("Mcp-Session-Id")

			resp := c.Do(context.Background(), map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
			if sse {
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !strings.HasPrefix(string(raw), "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"") ||
					!strings.Contains(string(raw), "event: message\nid: 42\ndata: ") {
					t.Errorf("SSE framing not kept:\n%s", raw)
				}
				resp = &http.Response{Header: resp.Header, Body: io.NopCloser(bytes.NewReader(raw))}
			}
			r := gwtest.OneReply(t, resp)
			var page struct {
				Tools      []json.RawMessage `json:"tools"`
				NextCursor string            `json:"nextCursor"`
				XResult    json.RawMessage   `json:"x-result"`
			}
			if err := json.Unmarshal(r.Result, &page); err != nil || len(page.Tools) != 6 {
				t.Fatalf("tools/list: %s %v", r.Result, err)
			}
			if page.NextCursor != "p2" || string(page.XResult) != "[1]" {
				t.Errorf("result fields lost: %s", r.Result)
			}
			want := []string{
				`{"execution":{"taskSupport":"optional"},"inputSchema":{"type":"object"},"name":"opt_a","x-extra":{"k":1}}`,
				`{"execution":{"other":1},"name":"sync_b"}`,
				`{"name":"sync_c"}`, // the upstream's own task tool, taken over by a sync rule (its plain calls go through the upstream's task)
				`{"execution":{"taskSupport":"required"},"name":"req_d"}`,
				`{"name":"plain_e","x-first":0,"execution":{"taskSupport":"optional"}}`, // untouched, key order and all
				`{"name":"plain_f","description":"d"}`,
			}
			for i, w := range want {
				if string(page.Tools[i]) != w {
					t.Errorf("tool %d = %s\nwant %s", i, page.Tools[i], w)
				}
			}

			r = c.Call("tools/list", map[string]any{"cursor": "p2"})
			if string(r.Result) != `{"_meta":{"m":1},"tools":[{"execution":{"taskSupport":"optional"},"name":"opt_g"}]}` {
				t.Errorf("page 2 = %s", r.Result)
			}

			// The catalogue holds what the upstream declared, for every replica.
			for tool, want := range map[string]string{"opt_a": "", "sync_b": "optional", "sync_c": "required",
				"req_d": "optional", "plain_e": "optional", "plain_f": "", "opt_g": ""} {
				if got := rp.mr.HGet("tg:tools", tool); got != want {
					t.Errorf("catalogue %s = %q, want %q", tool, got, want)
				}
				if got, _ := rp.fs[1].Decider.ToolInfo(context.Background(), tool); string(got.TaskSupport) != want {
					t.Errorf("replica B: catalogue taskSupport of %s = %q, want %q", tool, got.TaskSupport, want)
				}
			}
		})
	}
}

func TestToolsListOlderUpstream(t *testing.T) {
	// A 2025-06-18 upstream knows no execution.taskSupport; the rules add it.
	upSrv := httptest.NewServer(testupstream.Handler(testupstream.Options{ProtocolVersion: "2025-06-18"}))
	t.Cleanup(upSrv.Close)
	rp := newReplicas(t, upSrv.URL+"/mcp", 1, gwtest.Rules(t, "slow", policy.TaskRequired, "e*", policy.Task))
	c := &gwtest.Client{T: t, URLs: rp.urls}
	c.Initialize()
	r := c.Call("tools/list", map[string]any{})
	var res struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil || len(res.Tools) == 0 {
		t.Fatalf("tools/list: %+v %s", r.Error, r.Result)
	}
	want := map[string]string{"slow": "required", "echo": "optional", "elicit": "optional"}
	for _, tool := range res.Tools {
		got := ""
		if tool.Execution != nil {
			got = tool.Execution.TaskSupport
		}
		if got != want[tool.Name] {
			t.Errorf("%s: taskSupport %q, want %q", tool.Name, got, want[tool.Name])
		}
	}
}
