package front2025

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/taskstore"
)

func TestInitializeAddsTasksCapability(t *testing.T) {
	for _, jsonResp := range []bool{false, true} {
		t.Run(map[bool]string{false: "sse", true: "json"}[jsonResp], func(t *testing.T) {
			up := &spy{next: testupstream.Handler(testupstream.Options{JSONResponse: jsonResp})}
			upSrv := httptest.NewServer(up)
			t.Cleanup(upSrv.Close)
			rp := newReplicas(t, upSrv.URL+"/mcp", 1, nil)

			cs, cap := gwtest.ConnectSDK(t, rp.urls[0], "2025-11-25")
			if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
				t.Fatalf("protocolVersion = %q", v)
			}
			init := cap.InitAnswer(t)
			var res struct {
				ProtocolVersion string                     `json:"protocolVersion"`
				Capabilities    map[string]json.RawMessage `json:"capabilities"`
				ServerInfo      struct{ Name string }      `json:"serverInfo"`
			}
			if err := json.Unmarshal(init.Result, &res); err != nil {
				t.Fatal(err)
			}
			if string(res.Capabilities["tasks"]) != string(tasksCapability) || res.ServerInfo.Name != testupstream.Implementation.Name {
				t.Errorf("initialize result = %s", init.Result)
			}
			gwtest.Echo(t, cs, "through")

			// Recorded, with the client's capabilities.
			rec, err := rp.store.GetSession(context.Background(), cs.ID())
			if err != nil {
				t.Fatal(err)
			}
			if rec.ClientVersion != "2025-11-25" || rec.UpstreamVersion != "2025-11-25" || !strings.Contains(string(rec.ClientCapabilities), "elicitation") {
				t.Errorf("record = %+v caps %s", rec, rec.ClientCapabilities)
			}
		})
	}
}

func TestOlderUpstreamGainsTasks(t *testing.T) {
	up := &spy{next: testupstream.Handler(testupstream.Options{ProtocolVersion: "2025-06-18"})}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	rp := newReplicas(t, upSrv.URL+"/mcp", 2, nil)

	cs, cap := gwtest.ConnectSDK(t, rp.urls[0], "2025-11-25")
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("client sees protocolVersion %q, want 2025-11-25", v)
	}
	if !strings.Contains(string(cap.InitAnswer(t).Result), `"tasks":`) {
		t.Error("no tasks capability")
	}
	gwtest.Echo(t, cs, "old server")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	sid := cs.ID()
	rec, err := rp.store.GetSession(ctx, sid)
	if err != nil || rec.ClientVersion != "2025-11-25" || rec.UpstreamVersion != "2025-06-18" {
		t.Fatalf("record = %+v, %v", rec, err)
	}

	// Replica B never saw the session: it learns it from Redis, serves its
	// tasks/* and speaks 2025-06-18 upstream.
	r := gwtest.OneReply(t, rawPost(t, rp.urls[1], sid, "2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"via B"}}}`))
	if r.Error != nil || !strings.Contains(string(r.Result), "via B") {
		t.Fatalf("tools/call on B: %+v %s", r.Error, r.Result)
	}
	r = gwtest.OneReply(t, rawPost(t, rp.urls[1], sid, "2025-11-25", `{"jsonrpc":"2.0","id":6,"method":"tasks/list","params":{}}`))
	if r.Error != nil || !strings.Contains(string(r.Result), `"tasks"`) {
		t.Fatalf("tasks/list on B: %+v %s", r.Error, r.Result)
	}

	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	var posts, deletes int
	for _, s := range up.requests() {
		if s.rpcMethod == "initialize" || s.rpcMethod == "server/discover" { // the handshake and the era probe
			continue
		}
		if s.version != "2025-06-18" {
			t.Errorf("upstream got %s %s with MCP-Protocol-Version %q, want 2025-06-18", s.httpMethod, s.rpcMethod, s.version)
		}
		switch s.httpMethod {
		case http.MethodPost:
			posts++
		case http.MethodDelete:
			deletes++
		}
	}
	if posts < 4 || deletes != 1 {
		t.Errorf("upstream saw %d POSTs and %d DELETEs after initialize", posts, deletes)
	}

	// The DELETE (through A) forgot the session on A and in Redis.
	if _, err := rp.store.GetSession(ctx, sid); !errors.Is(err, taskstore.ErrNoSession) {
		t.Errorf("record after DELETE: %v", err)
	}
	if rp.fs[0].cachedSession(sid) {
		t.Error("A still caches the session")
	}
	// B notices at its next re-check.
	if !rp.fs[1].cachedSession(sid) {
		t.Fatal("B did not cache the session")
	}
	if rp.fs[1].recheckSession(ctx, sid) {
		t.Error("B still knows the deleted session")
	}
}
