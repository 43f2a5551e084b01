package upstreamside

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/upstream"
)

// Test2026TargetForWorkers: the calls a worker makes outside any client
// request: the owner's target, and its replacement after a 404, shared.
func Test2026TargetForWorkers(t *testing.T) {
	up := gwtest.NewEraUpstream(t, false)
	sides := newSides(t, up.URL, 2)
	ctx := context.Background()
	auth := http.Header{"Authorization": {"Bearer w"}}
	owner := core.OwnerOf(&http.Request{Header: auth})
	a, err := sides[0].Target(ctx, owner, auth, "")
	if err != nil || a.Stateless || a.Session.ID == "" || a.Session.ProtocolVersion != core.Version2025 || a.Session.Header.Get("Authorization") != "Bearer w" {
		t.Fatalf("target = %+v, %v", a, err)
	}
	b, err := sides[1].Target(ctx, owner, auth, "")
	if err != nil || b.Session.ID != a.Session.ID {
		t.Fatalf("replica 1 target = %+v, %v; want session %s", b, err, a.Session.ID)
	}
	up.Swap(false)
	na, err := sides[0].ReopenTarget(ctx, owner, auth, "", a)
	if err != nil || na.Session.ID == a.Session.ID {
		t.Fatalf("reopened = %+v, %v", na, err)
	}
	nb, err := sides[1].ReopenTarget(ctx, owner, auth, "", b)
	if err != nil || nb.Session.ID != na.Session.ID {
		t.Fatalf("replica 1 reopened = %+v, %v; want %s", nb, err, na.Session.ID)
	}
	if n := len(up.Posts("initialize")); n != 2 {
		t.Errorf("initialize = %d, want 2", n)
	}
	// The new session works for a worker's call.
	resp, err := sides[1].client.Call(ctx, nb.Session, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call",
		Params: ParamsFor(json.RawMessage(`{"name":"echo","arguments":{"text":"w"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), nb)},
		upstream.CallOptions{})
	if err != nil || resp.Error != nil || !strings.Contains(string(resp.Result), `"w"`) {
		t.Errorf("call on the reopened session: %v %+v", err, resp)
	}
}
