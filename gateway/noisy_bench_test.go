package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// Noisy-neighbour workload (issue 36), loopback only and bounded.
const (
	noisyTasks   = 2000             // principal A's ten-second tasks it tries to get
	noisyTries   = 200000           // bound on A's attempts (refused ones are retried at once)
	noisyWorkers = 32               // A's concurrent clients
	noisySamples = 200              // B's plain calls, and B's task creations, per leg
	noisyHold    = 10 * time.Second // each of A's tasks
)

// benchClient is a 2025-11-25 session client of one principal (its
// Authorization) over loopback HTTP.
type benchClient struct {
	url, auth, sid string
	id             atomic.Int64
}

func (c *benchClient) post(method string, params any) (*gwtest.Reply, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id.Add(1), "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", c.auth)
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if c.sid == "" {
		c.sid = resp.Header.Get("Mcp-Session-Id")
	}
	var out *gwtest.Reply
	err = gwtest.ScanMessages(resp, func(m gwtest.Reply) bool {
		if m.Method != "" {
			return true
		}
		out = &m
		return false
	})
	if err == nil && out == nil {
		err = fmt.Errorf("%s: no answer (HTTP %d)", method, resp.StatusCode)
	}
	return out, err
}

func newBenchClient(b *testing.B, url, auth string) *benchClient {
	c := &benchClient{url: url, auth: auth}
	if _, err := c.post("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "bench", "version": "0"}}); err != nil || c.sid == "" {
		b.Fatalf("initialize: %v (session %q)", err, c.sid)
	}
	return c
}

// noisyGateway is one replica with its default limits in front of the
// test upstream, on miniredis; its URL.
func noisyGateway(b *testing.B) string {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(mr.Close)
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	b.Cleanup(up.Close)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	store := taskstore.New(rdb, taskstore.Options{MaxTasksPerOwner: -1}) // A's share is the runner's to bound
	client, err := upstream.New(up.URL+"/mcp", upstream.Options{})
	if err != nil {
		b.Fatal(err)
	}
	all, err := policy.NewRule("*", policy.Task)
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(Config{Upstream: client, Store: store, PollLimit: -1, Policy: gwtest.RulesPolicy(policy.Rules{all}),
		MaxInflight: 1000}) // serve's default
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(func() {
		srv.Close()
		h.Close()
		store.Close()
	})
	return srv.URL + "/mcp"
}

// bLatencies runs B's leg: noisySamples plain calls and task creations,
// alternating; any refusal fails the benchmark (B is never refused for
// A's load).
func bLatencies(b *testing.B, c *benchClient) (plain, create []time.Duration) {
	for i := range noisySamples {
		start := time.Now()
		r, err := c.post("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "b"}})
		if err != nil || r.Error != nil {
			b.Fatalf("B's plain call %d: %v %+v", i, err, r)
		}
		plain = append(plain, time.Since(start))
		start = time.Now()
		r, err = c.post("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "b"}, "task": map[string]any{"ttl": 60000}})
		if err != nil || r.Error != nil {
			b.Fatalf("B's task creation %d refused or failed: %v %+v", i, err, r)
		}
		create = append(create, time.Since(start))
	}
	return plain, create
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

// flood is principal A: noisyWorkers clients creating ten-second tasks
// as fast as they go, a refused one tried again at once, until noisyTasks
// were accepted, noisyTries made, or stop.
func flood(b *testing.B, url string, stop <-chan struct{}, accepted, refused *atomic.Int64) *sync.WaitGroup {
	var tries atomic.Int64
	wg := &sync.WaitGroup{}
	for range noisyWorkers {
		c := newBenchClient(b, url, "Bearer alice") // one principal: one Authorization
		wg.Go(func() {
			for accepted.Load() < noisyTasks && tries.Add(1) <= noisyTries {
				select {
				case <-stop:
					return
				default:
				}
				r, err := c.post("tools/call", map[string]any{"name": "slow", "task": map[string]any{"ttl": 60000},
					"arguments": map[string]any{"seconds": noisyHold.Seconds(), "text": "a"}})
				switch {
				case err != nil:
					return
				case r.Error != nil:
					refused.Add(1)
				default:
					accepted.Add(1)
				}
			}
		})
	}
	return wg
}

// BenchmarkNoisyNeighbour: principal A tries to start 2,000 ten-second
// tasks as fast as 32 clients can (a refusal tried again at once) on one
// replica with the default limits;
// meanwhile principal B makes plain calls and creates tasks. B's p50 and
// p99 are reported as ratios against B alone on the same replica, measured
// first in the same run; B is never refused (the benchmark fails if it
// is). Run: go test ./gateway -run '^$' -bench NoisyNeighbour -benchtime 1x
func BenchmarkNoisyNeighbour(b *testing.B) {
	url := noisyGateway(b)
	bob := newBenchClient(b, url, "Bearer bob")
	bLatencies(b, bob) // warm-up: connections, the era, the tool catalogue
	alonePlain, aloneCreate := bLatencies(b, bob)

	var accepted, refused atomic.Int64
	stop := make(chan struct{})
	wg := flood(b, url, stop, &accepted, &refused)
	for accepted.Load()+refused.Load() < noisyWorkers*4 { // A's flood is under way
		time.Sleep(10 * time.Millisecond)
	}
	before := accepted.Load() + refused.Load()
	loadPlain, loadCreate := bLatencies(b, bob)
	duringA := accepted.Load() + refused.Load() - before
	close(stop)
	wg.Wait()

	ratio := func(load, alone []time.Duration, q float64) float64 {
		return float64(quantile(load, q)) / float64(quantile(alone, q))
	}
	b.ReportMetric(ratio(loadPlain, alonePlain, 0.5), "plain_p50_ratio")
	b.ReportMetric(ratio(loadPlain, alonePlain, 0.99), "plain_p99_ratio")
	b.ReportMetric(ratio(loadCreate, aloneCreate, 0.5), "create_p50_ratio")
	b.ReportMetric(ratio(loadCreate, aloneCreate, 0.99), "create_p99_ratio")
	b.ReportMetric(float64(accepted.Load()), "a_accepted")
	b.ReportMetric(float64(refused.Load()), "a_refused")
	b.ReportMetric(float64(duringA), "a_tries_during_b")
	b.Logf("B alone: plain p50 %v p99 %v, create p50 %v p99 %v; under A (%d of A's attempts meanwhile): plain p50 %v p99 %v, create p50 %v p99 %v",
		quantile(alonePlain, .5), quantile(alonePlain, .99), quantile(aloneCreate, .5), quantile(aloneCreate, .99), duringA,
		quantile(loadPlain, .5), quantile(loadPlain, .99), quantile(loadCreate, .5), quantile(loadCreate, .99))
}
