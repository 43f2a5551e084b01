package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"sync"
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
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// newLoneRunner is a runner with no Handler around it: a store on an
// in-process Redis and a stateless go-sdk upstream.
func newLoneRunner(t *testing.T, maxInflight int, log zerolog.Logger) (*Runner, *taskstore.Store, *upstreamside.Target) {
	t.Helper()
	return newLoneRunnerOn(t, testupstream.Handler(testupstream.Options{Stateless: true}), maxInflight, log)
}

// newLoneRunnerOn is newLoneRunner with the upstream served by h.
func newLoneRunnerOn(t *testing.T, h http.Handler, maxInflight int, log zerolog.Logger) (*Runner, *taskstore.Store, *upstreamside.Target) {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	client, err := upstream.New(up.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	store := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { store.Close(); rdb.Close() })
	rn := New(Params{Store: store, Up: client, Observe: func(string, time.Duration) {},
		Metrics: obs.NewMetrics(func() float64 { return 0 }), Log: log, Replica: "lone",
		Lease: 15 * time.Second, Renew: 5 * time.Second, MaxInflight: maxInflight})
	t.Cleanup(rn.Stop)
	target := &upstreamside.Target{Session: &upstream.Session{ProtocolVersion: core.Version2026}, Stateless: true}
	return rn, store, target
}

// TestRunnerAlone: the runner is a component of its own. Given a store and
// an upstream caller, it runs a task to its outcome and gives its
// in-flight slot back.
func TestRunnerAlone(t *testing.T) {
	var logs bytes.Buffer
	var logMu sync.Mutex
	rn, store, target := newLoneRunner(t, 0, zerolog.New(gwtest.LockedWriter{W: &logs, Mu: &logMu}))
	ctx := context.Background()
	j := startEcho(t, ctx, rn, target, "alone")
	done, err := store.WaitFor(ctx, "o", j.Task.ID, func(t *taskstore.Task) bool { return t.Status.Terminal() })
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != taskstore.StatusCompleted || !strings.Contains(string(done.Result), "alone") {
		t.Fatalf("task = %s %s %s %s, want completed with the echo", done.Status, done.StatusMessage, done.Result, done.Error)
	}
	idle, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rn.Idle(idle); err != nil || rn.Inflight() != 0 {
		t.Fatalf("after the task: idle %v, inflight %d", err, rn.Inflight())
	}
	// Its log lines carry durations in seconds, with the unit in the key.
	logMu.Lock()
	defer logMu.Unlock()
	lines := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if msg, _ := m["message"].(string); msg != "" {
			lines[msg] = m
		}
	}
	created, completed := lines["task created"], lines["task completed"]
	if created == nil || completed == nil {
		t.Fatalf("log has no task created/completed lines:\n%s", logs.String())
	}
	if created["protocol"] != string(taskstore.Protocol2026) || created["ttl_seconds"] != j.Task.TTL.Seconds() {
		t.Errorf("created line = %v, want protocol %q and ttl_seconds %v", created, taskstore.Protocol2026, j.Task.TTL.Seconds())
	}
	if d, ok := completed["duration_seconds"].(float64); !ok || d < 0 || d > 60 {
		t.Errorf("completed line = %v, want duration_seconds", completed)
	}
}

// TestRunnerAdmission: --max-inflight and drain are the runner's to
// enforce, with the errors clients get.
func TestRunnerAdmission(t *testing.T) {
	rn, _, _ := newLoneRunner(t, 1, zerolog.Nop())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	slot, e := rn.Admit(ctx, "p", AdmitCall)
	if e != nil {
		t.Fatalf("first admit: %v", e)
	}
	if _, e := rn.Admit(ctx, "p", AdmitCall); e == nil || e.Code != mcpwire.CodeInternalError || !strings.Contains(e.Message, "limit 1") {
		t.Fatalf("second admit at the limit: %v", e)
	}
	slot.free()
	slot.free() // a second Free gives back nothing more
	if n := rn.Inflight(); n != 0 {
		t.Fatalf("after Free twice: %d in flight", n)
	}
	slot, e = rn.Admit(ctx, "p", AdmitCall)
	if e != nil {
		t.Fatalf("admit after a slot came back: %v", e)
	}
	slot.free()
	if err := rn.Drain(ctx); err != nil {
		t.Fatalf("drain with nothing in flight: %v", err)
	}
	if _, e := rn.Admit(ctx, "p", AdmitCall); e != errDraining {
		t.Fatalf("admit while draining = %v, want errDraining", e)
	}
}

// TestRunnerHeldCallWaitsApart: while the upstream works on a task's call,
// the call waits for the answer on a goroutine with nothing of the runner
// on its stack (upstream.Client.CallAsync: the smallest stack, the memory
// of a held task), and no goroutine of the runner's call path is left.
// The answer still reaches the task, a cancellation still ends the call
// (the upstream sees its connection go), and an upstream that drops the
// call fails the task.
func TestRunnerHeldCallWaitsApart(t *testing.T) {
	for _, end := range []string{"answer", "cancel", "drop"} {
		t.Run(end, func(t *testing.T) {
			release, left := make(chan struct{}), make(chan struct{})
			inner := testupstream.Handler(testupstream.Options{Stateless: true})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if bytes.Contains(body, []byte(`"tools/call"`)) {
					select {
					case <-release:
					case <-r.Context().Done():
						close(left)
						return
					}
					if end == "drop" {
						if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
							conn.Close()
						}
						return
					}
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				inner.ServeHTTP(w, r)
			})
			rn, store, target := newLoneRunnerOn(t, h, 0, zerolog.Nop())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			j := startEcho(t, ctx, rn, target, "apart")
			// Wait until the call waits apart and its first goroutine ended.
			for {
				if ctx.Err() != nil {
					t.Fatal("the held call never waited apart")
				}
				var b bytes.Buffer
				_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
				waiting, runner := 0, false
				for _, g := range strings.Split(b.String(), "\n\n") {
					stack, _, _ := strings.Cut(g, "created by")
					if strings.Contains(stack, "[IO wait") && strings.Contains(stack, "upstream.waitReadable") {
						waiting++
						if strings.Contains(stack, "gateway.") {
							t.Fatalf("the goroutine waiting for the upstream has the runner's frames:\n%s", g)
						}
					}
					if strings.Contains(stack, "gateway.(*Runner).callUpstream") || strings.Contains(stack, "gateway.(*Runner).callStateless") {
						runner = true
					}
				}
				if waiting == 1 && !runner {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			want := taskstore.StatusCompleted
			switch end {
			case "cancel":
				if _, err := store.RequestCancel(ctx, "o", j.Task.ID, "the test cancels"); err != nil {
					t.Fatal(err)
				}
				want = taskstore.StatusCancelled
			case "drop":
				want = taskstore.StatusFailed
				close(release)
			default:
				close(release)
			}
			done, err := store.WaitFor(ctx, "o", j.Task.ID, func(t *taskstore.Task) bool { return t.Status.Terminal() })
			if err != nil {
				t.Fatal(err)
			}
			if done.Status != want || (want == taskstore.StatusCompleted && !strings.Contains(string(done.Result), "apart")) {
				t.Fatalf("task = %s %s %s %s, want %s", done.Status, done.StatusMessage, done.Result, done.Error, want)
			}
			if end == "cancel" {
				select {
				case <-left: // the upstream saw the call's connection go
				case <-ctx.Done():
					t.Fatal("the cancelled call's connection stayed open")
				}
			}
			if err := rn.Idle(ctx); err != nil || rn.Inflight() != 0 {
				t.Fatalf("after the task: idle %v, inflight %d", err, rn.Inflight())
			}
		})
	}
}

// startEcho creates and starts, on rn, owner "o"'s 2026-07-28 task of the
// echo tool with text, in front of target.
func startEcho(t *testing.T, ctx context.Context, rn *Runner, target *upstreamside.Target, text string) *Job {
	t.Helper()
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"` + text + `"},"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`)
	slot, e := rn.Admit(context.Background(), "o", AdmitTask)
	if e != nil {
		t.Fatal(e)
	}
	j := &Job{Owner: "o", Sess: target.Session, Slot: slot,
		Req:        &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: params},
		Client2026: &Job2026{Target: target, Params: params}}
	if err := rn.create(ctx, j, taskstore.Protocol2026, "echo", 0, 0); err != nil {
		t.Fatal(err)
	}
	rn.start(j)
	return j
}
