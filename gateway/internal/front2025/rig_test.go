package front2025

// The rig of this package's tests: Fronts on the parts gateway.New gives
// them (internal/gwtest/frontrig), each served with the routing the
// Handler does for a session's requests (gateway/handler.go, serveMCP and
// route): the Front first, anything it does not serve relayed upstream.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// serveFront is one replica's Front behind the Handler's routing.
func serveFront(r *frontrig.Replica) (*Front, http.Handler) {
	f := New(r.Deps, r.Cfg.Store, r.Cfg.Anonymous)
	up := r.Deps.Up
	return f, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			msg, ok := frontrig.ReadPost(w, req)
			if !ok {
				return
			}
			if f.Serve(w, req, msg) {
				return
			}
			up.Forward(w, req, msg, f.UpstreamHeader(req), "")
			return
		}
		if f.ServeEmulatedSession(w, req) {
			return
		}
		var body io.Reader
		if req.ContentLength != 0 && req.Body != nil && req.Body != http.NoBody {
			body = req.Body
		}
		resp, err := up.Pass(req.Context(), req.Method, f.UpstreamHeader(req), body)
		if err != nil {
			up.FailHTTP(w, req, err)
			return
		}
		if f.StreamOrEnd(w, req, resp) {
			return
		}
		up.Relay(w, req, resp)
	})
}

func newFleet(t *testing.T, upstreamURL string) *frontrig.Fleet {
	return frontrig.NewFleet(t, upstreamURL, func(r *frontrig.Replica) http.Handler {
		_, h := serveFront(r)
		return h
	})
}

// cluster is N replicas on one Redis, in front of one upstream that
// records its calls (the Handler tests' newCluster).
type cluster struct {
	urls []string
	rec  *testupstream.Recorder
}

func newCluster(t *testing.T, replicas int, rules policy.Rules) *cluster {
	t.Helper()
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Recorder: rec}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	for i := 0; i < replicas; i++ {
		f.Add(func(c *frontrig.Config) { c.Policy = gwtest.RulesPolicy(rules) })
	}
	return &cluster{urls: f.URLs, rec: rec}
}

// replicas are Fronts sharing one miniredis, in front of one upstream
// (the Handler tests' newReplicas).
type replicas struct {
	fs    []*Front
	urls  []string
	mr    *miniredis.Miniredis
	store *taskstore.Store // a store of its own on the same Redis, for assertions
}

func newReplicas(t *testing.T, upstreamURL string, n int, rs policy.Rules) *replicas {
	t.Helper()
	rp := &replicas{}
	fl := frontrig.NewFleet(t, upstreamURL, func(r *frontrig.Replica) http.Handler {
		f, h := serveFront(r)
		rp.fs = append(rp.fs, f)
		return h
	})
	for i := 0; i < n; i++ {
		fl.Add(func(c *frontrig.Config) {
			c.Policy, c.PollLimit, c.ReplicaID = gwtest.RulesPolicy(rs), 0, fmt.Sprintf("r%d", i)
		})
	}
	rp.urls, rp.mr, rp.store = fl.URLs, fl.MR, fl.Observer()
	return rp
}

// The helpers below were the Handler tests' (gateway/session_test.go).

type spy struct {
	next http.Handler
	mu   sync.Mutex
	seen []spied
}

type spied struct {
	httpMethod, rpcMethod, version string
	body                           []byte
}

func (s *spy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &m)
	s.mu.Lock()
	s.seen = append(s.seen, spied{r.Method, m.Method, r.Header.Get("Mcp-Protocol-Version"), body})
	s.mu.Unlock()
	s.next.ServeHTTP(w, r)
}

func (s *spy) requests() []spied {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]spied(nil), s.seen...)
}

// rawPost sends one JSON-RPC message with the given session and version
// headers ("" leaves one out).
func rawPost(t *testing.T, url, sid, version, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
