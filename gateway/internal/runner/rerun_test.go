package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// TestRerunCredentials: a rerun runs with the call's credentials: the
// token it was made with, sealed in the task's record (never in clear)
// under a secret the replicas share through the store, or, where the
// gateway keeps its principals' tokens (Durable.CredKey, Freshest: the
// gateway's credentials, tested there), that client's freshest.
func TestRerunCredentials(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	store := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { store.Close() })
	fresh := map[string]string{"client-1": "Bearer refreshed"} // the gateway's store of freshest tokens
	replica := func(kept bool) *Runner {
		d := Durable{MaxAttempts: 3, Rerunnable: func(context.Context, string) (bool, string) { return true, "test" }}
		if kept {
			d.CredKey = func(auth string) string {
				if auth == "Bearer old" {
					return "client-1"
				}
				return ""
			}
			d.Freshest = func(_ context.Context, key string) string { return fresh[key] }
		}
		rn := New(Params{Store: store, Observe: func(string, time.Duration) {},
			Metrics: obs.NewMetrics(func() float64 { return 0 }), Log: zerolog.Nop(), Replica: "r", Lease: time.Minute, Renew: 20 * time.Second,
			Durable: d})
		t.Cleanup(rn.Stop)
		return rn
	}
	j := &Job{Owner: "o", Sess: &upstream.Session{ID: "s1", Header: http.Header{"Authorization": {"Bearer old"}}},
		Req: &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: json.RawMessage(`{"name":"report","arguments":{}}`)}}
	raw := replica(true).rerunSpec(context.Background(), j, "report")
	if raw == nil || bytes.Contains(raw, []byte("Bearer old")) || j.spec.CredKey != "client-1" || j.Id == "" {
		t.Fatalf("spec %s: want one, its token sealed, naming the principal's client", raw)
	}
	task := &taskstore.Task{ID: j.Id, Owner: "o"}
	again, err := replica(true).jobFromSpec(context.Background(), task, j.spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Sess.Authorization(context.Background()); got != "Bearer refreshed" || again.Sess.ID != "s1" {
		t.Errorf("the rerun sends %q on session %q, want the client's freshest token on s1", got, again.Sess.ID)
	}
	plain, err := replica(false).jobFromSpec(context.Background(), task, j.spec)
	if err != nil || plain.Sess.Header.Get("Authorization") != "Bearer old" || plain.Sess.Authorization != nil {
		t.Errorf("without kept tokens: %v %v, want the call's own token", plain.Sess.Header, err)
	}
	if _, err := replica(false).jobFromSpec(context.Background(), &taskstore.Task{ID: "another", Owner: "o"}, j.spec); err == nil {
		t.Error("another task's record opened the sealed token")
	}
}
