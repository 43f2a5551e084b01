package front2026

// The rig of this package's tests: Fronts on the parts gateway.New gives
// them (internal/gwtest/frontrig), each served with the routing the
// Handler does for a POST (gateway/handler.go, route): a 2026-07-28
// request to the Front, anything else relayed upstream unchanged.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// serveFront is one replica's Front behind the Handler's routing of a POST.
func serveFront(r *frontrig.Replica) http.Handler {
	f := New(r.Deps, r.Cfg.Store, r.Cfg.Anonymous, r.Life, r.Cfg.MRTRHold)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			resp, err := r.Deps.Up.Pass(req.Context(), req.Method, req.Header, req.Body)
			if err != nil {
				r.Deps.Up.FailHTTP(w, req, err)
				return
			}
			r.Deps.Up.Relay(w, req, resp)
			return
		}
		msg, ok := frontrig.ReadPost(w, req)
		if !ok {
			return
		}
		if IsStateless(req, msg) {
			f.Serve(w, req, msg)
			return
		}
		r.Deps.Up.Forward(w, req, msg, req.Header, "")
	})
}

func newFleet(t *testing.T, upstreamURL string) *frontrig.Fleet {
	return frontrig.NewFleet(t, upstreamURL, serveFront)
}

// modernCluster is N replicas on one Redis in front of one upstream of the
// given era.
type modernCluster struct {
	urls []string
	rec  *testupstream.Recorder
	mr   *miniredis.Miniredis
}

func newModernCluster(t *testing.T, replicas int, stateless bool, rules policy.Rules, hybrid time.Duration) *modernCluster {
	t.Helper()
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: stateless, Recorder: rec}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	for i := 0; i < replicas; i++ {
		f.Add(func(c *frontrig.Config) { c.Policy = gwtest.HybridPolicy(rules, hybrid) })
	}
	return &modernCluster{urls: f.URLs, rec: rec, mr: f.MR}
}

// replicas is n replicas of the Front on one Redis with the rules rs
// (the Handler tests' newReplicas).
type replicas struct {
	rs    []*frontrig.Replica
	urls  []string
	mr    *miniredis.Miniredis
	store *taskstore.Store // a store of its own on the same Redis, for assertions
}

func newReplicas(t *testing.T, upstreamURL string, n int, rs policy.Rules) *replicas {
	t.Helper()
	fl := newFleet(t, upstreamURL)
	for i := 0; i < n; i++ {
		fl.Add(func(c *frontrig.Config) {
			c.Policy, c.PollLimit, c.ReplicaID = gwtest.RulesPolicy(rs), 0, fmt.Sprintf("r%d", i)
		})
	}
	return &replicas{rs: fl.Rs, urls: fl.URLs, mr: fl.MR, store: fl.Observer()}
}

// upstreamEras are the two eras of upstream, by name.
var upstreamEras = []struct {
	Name      string
	Stateless bool
}{{"modern-upstream", true}, {"legacy-upstream", false}}
