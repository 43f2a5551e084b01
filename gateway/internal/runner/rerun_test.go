package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/testupstream"
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

// flakyUpstream is a real go-sdk stateless upstream behind a switch that
// can fail a tools/call on the way (fail returns the HTTP status to answer
// instead, 0 to pass it on) or rewrite the upstream's answer.
type flakyUpstream struct {
	h       http.Handler
	mu      sync.Mutex
	calls   int // tools/calls that reached the switch
	fail    func(n int, body []byte) int
	rewrite func(n int, answer []byte) []byte
}

func (f *flakyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(`"tools/call"`)) {
		f.h.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if f.fail != nil {
		if status := f.fail(n, body); status != 0 {
			http.Error(w, http.StatusText(status), status) // a proxy's page, no JSON-RPC
			return
		}
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, r)
	out := rec.Body.Bytes()
	if f.rewrite != nil {
		out = f.rewrite(n, out)
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(out)
}

func (f *flakyUpstream) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// durableRig is a store shared by replicas, each a runner of its own.
type durableRig struct {
	t      *testing.T
	rdb    *redis.Client
	store  *taskstore.Store
	traces map[string]gwtest.Traced // each replica's spans
}

func newDurableRig(t *testing.T) *durableRig {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	store := taskstore.New(rdb, taskstore.Options{LeaseGrace: 100 * time.Millisecond})
	t.Cleanup(func() { store.Close(); rdb.Close() })
	return &durableRig{t: t, rdb: rdb, store: store, traces: map[string]gwtest.Traced{}}
}

// replica is a runner named name on the rig's store, calling the upstream
// at url, where every tool is rerunnable.
func (g *durableRig) replica(name string, up http.Handler) (*Runner, *obs.Metrics) { //nolint:unparam
	srv := httptest.NewServer(up)
	g.t.Cleanup(srv.Close)
	client, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
	if err != nil {
		g.t.Fatal(err)
	}
	m := obs.NewMetrics(func() float64 { return 0 })
	tr := gwtest.NewTraced()
	g.traces[name] = tr
	m.Trace = obs.NewTracing(tr.TP, name)
	rn := New(Params{Store: g.store, Up: client, Observe: func(string, time.Duration) {},
		Metrics: m, Log: zerolog.Nop(), Replica: name, Trace: m.Trace, Lease: 600 * time.Millisecond, Renew: 150 * time.Millisecond,
		Durable: Durable{MaxAttempts: 3, Backoff: 20 * time.Millisecond, Reruns: m.NewReruns(),
			Rerunnable: func(context.Context, string) (bool, string) { return true, "every tool, for the test" }}})
	g.t.Cleanup(rn.Stop)
	return rn, m
}

// startTool creates and starts owner "o"'s 2026-07-28 task of tool with
// args on rn, in front of a stateless upstream.
func startTool(t *testing.T, rn *Runner, tool, args string) *Job {
	t.Helper()
	params := json.RawMessage(`{"name":"` + tool + `","arguments":` + args + `,"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}`)
	slot, e := rn.Admit(context.Background(), "o", AdmitTask)
	if e != nil {
		t.Fatal(e)
	}
	target := &upstreamside.Target{Session: &upstream.Session{ProtocolVersion: core.Version2026, Header: http.Header{"Authorization": {"Bearer owner-token"}}}, Stateless: true}
	j := &Job{Owner: "o", Sess: target.Session, Slot: slot, ClientCaps: json.RawMessage(`{"elicitation":{}}`),
		Req:        &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: params},
		Client2026: &Job2026{Target: target, Params: params}}
	if err := rn.create(context.Background(), j, taskstore.Protocol2026, tool, 0, 0); err != nil {
		t.Fatal(err)
	}
	rn.start(j)
	return j
}

func (g *durableRig) waitTerminal(id string) *taskstore.Task {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := g.store.WaitFor(ctx, "o", id, func(t *taskstore.Task) bool { return t.Status.Terminal() })
	if err != nil {
		g.t.Fatalf("task %s never ended: %v", id, err)
	}
	return got
}

// TestRerunAfterReplicaStops: replica A holds a rerunnable task whose
// upstream call hangs, and stops. Its task is not failed: replica B's
// recoverer begins the second attempt once A's lease ran out, and runs
// the same call, with the same credentials, on its (working) upstream. The
// task ends with its own result, having said what happened.
func TestRerunAfterReplicaStops(t *testing.T) {
	g := newDurableRig(t)
	hung := make(chan struct{})
	var sawAuth sync.Map
	real := testupstream.Handler(testupstream.Options{Stateless: true})
	hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body, _ := io.ReadAll(r.Body); bytes.Contains(body, []byte(`"tools/call"`)) {
			close(hung)
			<-r.Context().Done() // the call never answers on A
			return
		}
		http.Error(w, "not here", http.StatusNotFound)
	})
	a, _ := g.replica("a", hang)
	rerunning, told := make(chan struct{}), make(chan struct{})
	var rerun sync.Once
	b, _ := g.replica("b", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth.Store(r.Header.Get("Authorization"), true)
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) { // held until the test has read the task
			rerun.Do(func() { close(rerunning); <-told })
		}
		real.ServeHTTP(w, r)
	}))
	j := startTool(t, a, "echo", `{"text":"mine alone"}`)
	<-hung
	a.Stop() // as if it died: its task keeps its lease, which runs out
	stopped := time.Now()

	select {
	case <-rerunning:
	case <-time.After(30 * time.Second): // a bound on a hang, not a timed assertion
		t.Fatal("replica B never ran the call again")
	}
	// What a client polling the task meanwhile is told (tasks/get's
	// statusMessage).
	cur, err := g.store.Get(context.Background(), "o", j.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Status != taskstore.StatusWorking || cur.StatusMessage != "the replica running it stopped; running it again (attempt 2 of 3)" {
		t.Errorf("while it runs again the task reads %s %q: the client is not told of the rerun", cur.Status, cur.StatusMessage)
	}
	close(told)
	got := g.waitTerminal(j.Task.ID)
	t.Logf("the task completed %v after its replica stopped (measured, not asserted): lease 600ms + grace 100ms, sweeps every 150ms, backoff 20ms, echo itself ~0",
		time.Since(stopped).Round(time.Millisecond))
	if got.Status != taskstore.StatusCompleted || !strings.Contains(string(got.Result), "mine alone") {
		t.Fatalf("task = %s %q %s %s, want completed with its own echo", got.Status, got.StatusMessage, got.Result, got.Error)
	}
	if got.Attempts != 2 || got.LastCause != "replica_stopped" {
		t.Errorf("attempts %d, last cause %q; want 2, replica_stopped", got.Attempts, got.LastCause)
	}
	if _, ok := sawAuth.Load("Bearer owner-token"); !ok {
		t.Error("the rerun did not carry the call's credentials")
	}
	if n := gwtest.CounterValue(b.Durable.Reruns.WithLabelValues("echo", "replica_stopped")); n != 1 {
		t.Errorf("taskgate_task_reruns_total{echo,replica_stopped} = %v, want 1", n)
	}
	// The credentials are in the record, sealed: never in clear.
	raw, _ := g.rdb.HGet(context.Background(), taskKey(g.rdb, j.Task.ID), "rerun").Result()
	if raw == "" || strings.Contains(raw, "owner-token") {
		t.Errorf("the rerun record %q: want it, without the token in clear", raw)
	}
}

// TestRerunOnTransientFailure: a 503 on the way makes the worker run the
// call again, within the attempts; past them, the task fails naming the
// attempts and the cause. The server's own answers (isError, a JSON-RPC
// error) are final: one call each, never rerun.
func TestRerunOnTransientFailure(t *testing.T) {
	for _, tc := range []struct {
		name, tool, args string
		failures         int
		calls, attempts  int
		status           taskstore.Status
		want             string
	}{
		{"recovers", "echo", `{"text":"third time"}`, 2, 3, 3, taskstore.StatusCompleted, "third time"},
		{"gives up", "echo", `{"text":"never"}`, 9, 3, 3, taskstore.StatusFailed, "gave up after 3 attempts; the last ended because the upstream answered 503"},
		{"isError is final", "fail", `{}`, 0, 1, 1, taskstore.StatusCompleted, `"isError":true`},
		{"JSON-RPC error is final", "rpcerror", `{}`, 0, 1, 1, taskstore.StatusFailed, "the tool call failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newDurableRig(t)
			up := &flakyUpstream{h: testupstream.Handler(testupstream.Options{Stateless: true}),
				fail: func(n int, _ []byte) int {
					if n <= tc.failures {
						return http.StatusServiceUnavailable
					}
					return 0
				}}
			rn, _ := g.replica("r", up)
			j := startTool(t, rn, tc.tool, tc.args)
			got := g.waitTerminal(j.Task.ID)
			outcome := got.StatusMessage + " " + string(got.Result) + " " + string(got.Error)
			if got.Status != tc.status || !strings.Contains(outcome, tc.want) {
				t.Fatalf("task = %s %s, want %s with %q", got.Status, outcome, tc.status, tc.want)
			}
			if up.count() != tc.calls || got.Attempts != max(tc.attempts, 1) && got.Rerun != nil {
				t.Errorf("%d calls upstream, %d attempts; want %d, %d", up.count(), got.Attempts, tc.calls, tc.attempts)
			}
			if n := gwtest.CounterValue(rn.Durable.Reruns.WithLabelValues(tc.tool, "http_503")); int(n) != tc.attempts-1 {
				t.Errorf("reruns counted %v, want %d", n, tc.attempts-1)
			}
			// The task's span records its attempts.
			var attempts int64
			gwtest.WaitFor(t, func() bool {
				for _, s := range g.traces["r"].Named("mcp.task") {
					for _, a := range s.Attributes() {
						if a.Key == "taskgate.task.attempts" {
							attempts = a.Value.AsInt64()
							return true
						}
					}
				}
				return false
			})
			if attempts != int64(tc.attempts) {
				t.Errorf("the task's span says %d attempts, want %d", attempts, tc.attempts)
			}
		})
	}
}

// TestRerunReplaysAnswers: the client answers the elicit tool's question;
// the call then fails on the way (503) and runs again. The rerun asks the
// same question: the recorded answer is given again, the client is not
// asked, the result is the client's answer. When the rerun asks another
// question, it reaches the client.
func TestRerunReplaysAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reworded bool // the second attempt asks another question
		asked    int  // questions the client saw
		want     string
	}{
		{"same question", false, 1, "Hello, Ada!"},
		{"new question", true, 2, "Hello, Bob!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newDurableRig(t)
			var failed sync.Once
			up := &flakyUpstream{h: testupstream.Handler(testupstream.Options{Stateless: true})}
			up.fail = func(_ int, body []byte) int {
				status := 0
				if bytes.Contains(body, []byte("inputResponses")) {
					failed.Do(func() { status = http.StatusServiceUnavailable }) // the first answered round breaks
				}
				return status
			}
			up.rewrite = func(n int, out []byte) []byte {
				if tc.reworded && n > 2 { // the rerun's rounds
					return bytes.ReplaceAll(out, []byte("What is your name?"), []byte("What is your full name?"))
				}
				return out
			}
			rn, _ := g.replica("r", up)
			j := startTool(t, rn, "elicit", `{}`)
			ctx := context.Background()
			answers := []string{"Ada", "Bob"}
			for i := 0; ; i++ {
				cur, err := g.store.WaitFor(ctx, "o", j.Task.ID, func(t *taskstore.Task) bool {
					return t.Status.Terminal() || t.Status == taskstore.StatusInputRequired && len(t.InputRequests) > 0
				})
				if err != nil {
					t.Fatal(err)
				}
				if cur.Status.Terminal() {
					break
				}
				if i >= len(answers) {
					t.Fatalf("asked %d times", i+1)
				}
				for key := range cur.InputRequests {
					if _, err := g.store.AnswerInputs(ctx, "o", j.Task.ID, map[string]json.RawMessage{key: json.RawMessage(
						`{"result":{"action":"accept","content":{"name":"` + answers[i] + `"}}}`)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			got := g.waitTerminal(j.Task.ID)
			if got.Status != taskstore.StatusCompleted || !strings.Contains(string(got.Result), tc.want) || got.Attempts != 2 {
				t.Fatalf("task = %s %q %s, attempts %d; want completed with %q after 2", got.Status, got.StatusMessage, got.Result, got.Attempts, tc.want)
			}
			used := 0
			for _, f := range g.rdb.HKeys(ctx, taskKey(g.rdb, j.Task.ID)).Val() {
				if strings.HasPrefix(f, "used:") {
					used++
				}
			}
			if used != tc.asked {
				t.Errorf("the client was asked %d questions, want %d", used, tc.asked)
			}
		})
	}
}

// cutOnce passes a session upstream through, but cuts the first
// tools/call's stream off just before its result: the call fails on the
// way after the client answered the tool's question.
type cutOnce struct {
	rp   *httputil.ReverseProxy
	done atomic.Bool
}

func newCutOnce(t *testing.T, h http.Handler) *cutOnce {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	c := &cutOnce{rp: httputil.NewSingleHostReverseProxy(u)}
	c.rp.FlushInterval = -1
	c.rp.ErrorLog = log.New(io.Discard, "", 0)
	c.rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Header.Get("X-Cut") != "" {
			resp.Body = &cutReader{r: resp.Body}
		}
		return nil
	}
	return c
}

func (c *cutOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if bytes.Contains(body, []byte(`"tools/call"`)) && c.done.CompareAndSwap(false, true) {
		r.Header.Set("X-Cut", "1")
	}
	c.rp.ServeHTTP(w, r)
}

// cutReader fails the stream at the first chunk carrying the result.
type cutReader struct{ r io.ReadCloser }

func (c *cutReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if bytes.Contains(p[:n], []byte("Hello, ")) {
		return 0, errors.New("cut")
	}
	return n, err
}

func (c *cutReader) Close() error { return c.r.Close() }

// TestRerunReplaysAnswersOnASession: the same on a session upstream,
// whose question comes as a server→client request on the call's stream:
// the client answers, the stream breaks before the result, the rerun asks
// again on the same session and gets the recorded answer, not the client.
func TestRerunReplaysAnswersOnASession(t *testing.T) {
	g := newDurableRig(t)
	up := newCutOnce(t, testupstream.Handler(testupstream.Options{}))
	rn, _ := g.replica("r", up)
	sess, _, err := rn.Up.(*upstream.Client).Initialize(context.Background(), nil,
		json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":"t","version":"0"}}`))
	if err != nil {
		t.Fatal(err)
	}
	slot, e := rn.Admit(context.Background(), "o", AdmitTask)
	if e != nil {
		t.Fatal(e)
	}
	j := &Job{Owner: "o", Sess: sess, Slot: slot, ClientCaps: json.RawMessage(`{"elicitation":{"form":{}}}`),
		Req: &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: json.RawMessage(`{"name":"elicit","arguments":{}}`)}}
	ctx := context.Background()
	if err := rn.create(ctx, j, taskstore.Protocol2025, "elicit", 0, 0); err != nil {
		t.Fatal(err)
	}
	rn.start(j)
	asked, err := g.store.WaitFor(ctx, "o", j.Task.ID, func(t *taskstore.Task) bool { return len(t.InputRequests) > 0 || t.Status.Terminal() })
	if err != nil || len(asked.InputRequests) != 1 {
		t.Fatalf("the question: %+v %v", asked, err)
	}
	for key := range asked.InputRequests {
		if _, err := g.store.AnswerInputs(ctx, "o", j.Task.ID, map[string]json.RawMessage{key: json.RawMessage(
			`{"result":{"action":"accept","content":{"name":"Ada"}}}`)}); err != nil {
			t.Fatal(err)
		}
	}
	got := g.waitTerminal(j.Task.ID)
	if got.Status != taskstore.StatusCompleted || !strings.Contains(string(got.Result), "Hello, Ada!") || got.Attempts != 2 || got.LastCause != "connection_reset" {
		t.Fatalf("task = %s %q %s, attempts %d (%s); want completed with Ada's answer after a rerun", got.Status, got.StatusMessage, got.Result, got.Attempts, got.LastCause)
	}
	used := 0
	for _, f := range g.rdb.HKeys(ctx, taskKey(g.rdb, j.Task.ID)).Val() {
		if strings.HasPrefix(f, "used:") {
			used++
		}
	}
	if used != 1 {
		t.Errorf("the client was asked %d questions, want 1", used)
	}
}

// TestRecovererGivesUpAfterTheAttempts: a durable task whose replica died
// on its last attempt is failed by the recoverer, naming the attempts and
// the last cause, not run a fourth time.
func TestRecovererGivesUpAfterTheAttempts(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	now := time.Now()
	store := taskstore.New(rdb, taskstore.Options{Clock: func() time.Time { return now }, LeaseGrace: time.Second})
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	task, err := store.Create(ctx, taskstore.NewTask{Owner: "o", Tool: "report", Protocol: taskstore.Protocol2026,
		Lease: &taskstore.LeaseRequest{Holder: "dead", Duration: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SetRerun(ctx, "o", task.ID, []byte(`{"rerun":true,"params":{"name":"report"}}`)); err != nil {
		t.Fatal(err)
	}
	for range 2 { // attempts 2 and 3, both on "dead"
		if _, err := store.BeginAttempt(ctx, "o", task.ID, taskstore.AttemptRequest{Holder: "dead", Lease: 2 * time.Second, Max: 3}); err != nil {
			t.Fatal(err)
		}
	}
	rn := New(Params{Store: store, Observe: func(string, time.Duration) {},
		Metrics: obs.NewMetrics(func() float64 { return 0 }), Log: zerolog.Nop(), Replica: "survivor", Lease: 2 * time.Second, Renew: time.Hour,
		Durable: Durable{MaxAttempts: 3, Backoff: time.Millisecond}})
	t.Cleanup(rn.Stop)
	now = now.Add(4 * time.Second)
	if n := rn.recoverer.RecoverOnce(ctx); n != 0 {
		t.Errorf("recoverOnce counted %d failed as before; the durable task is the hook's", n)
	}
	got, err := store.Get(ctx, "o", task.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := "gave up after 3 attempts; the last ended because the replica running it stopped: the gateway replica running the task (dead) stopped before the upstream answered"
	if got.Status != taskstore.StatusFailed || got.StatusMessage != want || !strings.Contains(string(got.Error), "-32603") {
		t.Errorf("task = %s %q %s, want failed %q", got.Status, got.StatusMessage, got.Error, want)
	}
	if got.Attempts != 3 || got.Lease.Holder != "" {
		t.Errorf("attempts %d, lease %q: want 3, released", got.Attempts, got.Lease.Holder)
	}
}
