package upstreamside

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/upstream"
)

// TestToolDeclaredDiscovers: a call of a tool no tools/list taught the
// catalogue lists the upstream's tools (every page) once, and the
// declaration is then known; another unknown tool soon after does not
// list again.
func TestToolDeclaredDiscovers(t *testing.T) {
	var lists atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		lists.Add(1)
		result := `{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"p2"}`
		if req.Params.Cursor == "p2" {
			result = `{"tools":[{"name":"native","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + result + `}`))
	}))
	t.Cleanup(srv.Close)
	u := newSides(t, srv.URL, 1)[0]
	sess := &upstream.Session{ID: "s1", ProtocolVersion: core.Version2025}
	decl, listed := u.ToolDeclared(t.Context(), sess, "native")
	if !listed || decl.TaskSupport != "required" || lists.Load() != 2 {
		t.Fatalf("native: %+v %v after %d tools/list", decl, listed, lists.Load())
	}
	if _, listed := u.ToolDeclared(t.Context(), sess, "unknown"); listed || lists.Load() != 2 {
		t.Errorf("an unknown tool right after: listed %v, %d tools/list (want no new listing)", listed, lists.Load())
	}
	if c := u.catalogue.DecideCall(t.Context(), "native", policy.Client2025); !c.Native || c.Ruled {
		t.Errorf("native(native) = %v, %v", c.Native, c.Ruled)
	}
}

// TestToolDeclaredConcurrentCallers: callers racing one discovery wait for
// it and see its result; a failed listing does not hold off the next one
// for discoverEvery.
func TestToolDeclaredConcurrentCallers(t *testing.T) {
	var lists atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		failing := fail.Load()
		if lists.Add(1) == 1 {
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		if failing {
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32603,"message":"not now"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"tools":[{"name":"native","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}}`))
	}))
	t.Cleanup(srv.Close)
	u := newSides(t, srv.URL, 1)[0]
	sess := &upstream.Session{ID: "s1", ProtocolVersion: core.Version2025}

	// The first listing fails; callers waiting on it see nothing declared.
	results := make(chan bool, 4)
	for range 4 {
		go func() {
			_, listed := u.ToolDeclared(t.Context(), sess, "native")
			results <- listed
		}()
	}
	gwtest.WaitFor(t, func() bool { return lists.Load() == 1 })
	fail.Store(false)
	close(release)
	for range 4 {
		if <-results {
			t.Error("a caller saw a declaration from a failed listing")
		}
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("%d listings for 4 concurrent callers, want 1", n)
	}
	// A second later the next call lists again (no 30 s hold after a
	// failure), and succeeds.
	gwtest.WaitFor(t, func() bool {
		_, listed := u.ToolDeclared(t.Context(), sess, "native")
		return listed
	})
}
