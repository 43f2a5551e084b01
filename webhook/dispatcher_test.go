package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/taskstore"
)

var ctx = context.Background()

// backend opens stores on one Redis: miniredis, or a real redis-server.
type backend struct {
	name string
	open func(t *testing.T, opts taskstore.Options) *taskstore.Store
}

func backends(t *testing.T) []backend {
	mr := miniredis.RunT(t)
	addr := redistest.Start(t)
	open := func(addr string) func(t *testing.T, opts taskstore.Options) *taskstore.Store {
		return func(t *testing.T, opts taskstore.Options) *taskstore.Store {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			s := taskstore.New(rdb, opts)
			t.Cleanup(func() { _ = s.Close(); _ = rdb.Close() })
			return s
		}
	}
	return []backend{{"miniredis", open(mr.Addr())}, {"redis-server", open(addr)}}
}

// forEachBackend runs f on miniredis and on a real redis-server, each
// with a prefix of its own.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for i, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			prefix := fmt.Sprintf("t%d%s", i, strings.ReplaceAll(t.Name(), "/", "_"))
			inner := b.open
			b.open = func(t *testing.T, opts taskstore.Options) *taskstore.Store {
				opts.Prefix = prefix
				return inner(t, opts)
			}
			f(t, b)
		})
	}
}

// receiver is an httptest endpoint that verifies every delivery (a
// wrong one fails the test) and records them in arrival order.
type receiver struct {
	t   *testing.T
	srv *httptest.Server

	mu     sync.Mutex
	got    []Payload // in arrival order, verified
	ids    map[string]int
	calls  int
	answer func(n int, r *http.Request) int // status for call n (1-based); nil: 204
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{t: t, ids: map[string]int{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := Verify([]string{testSecret}, r.Header, body, time.Now(), DefaultTolerance); err != nil {
		rc.t.Errorf("delivery %s refused: %v", r.Header.Get(HeaderID), err)
		w.WriteHeader(400)
		return
	}
	rc.mu.Lock()
	rc.calls++
	n := rc.calls
	answer := rc.answer
	rc.mu.Unlock()
	status := 204
	if answer != nil {
		status = answer(n, r)
	}
	if r.Context().Err() != nil {
		return // the sender gave up: this attempt failed for it
	}
	if status/100 == 2 {
		var p Payload
		if err := json.Unmarshal(body, &p); err != nil {
			rc.t.Errorf("payload: %v", err)
		}
		rc.mu.Lock()
		rc.got = append(rc.got, p)
		rc.ids[r.Header.Get(HeaderID)]++
		rc.mu.Unlock()
	}
	w.WriteHeader(status)
}

func (rc *receiver) delivered() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// waitFor waits until cond holds (a bounded wait, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// clock is a settable clock shared by the store and the dispatcher.
type clock struct {
	mu sync.Mutex
	at time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.at = c.at.Add(d)
	c.mu.Unlock()
}

func testEndpoint(name, url string) Endpoint {
	return Endpoint{Name: name, URL: url, Secrets: []string{testSecret}}
}

func startDispatcher(t *testing.T, cfg Config) *Dispatcher {
	t.Helper()
	if cfg.Poll == 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	t.Cleanup(d.Stop)
	return d
}

// taskIDs are the UUIDs the tests' tasks are named by (task ids are
// UUIDs, and event ids carry them).
var taskIDs sync.Map

func tid(name string) string {
	v, _ := taskIDs.LoadOrStore(name, uuid.NewString())
	return v.(string)
}

func evID(task string, n int) string { return fmt.Sprintf("evt_%s_%d", tid(task), n) }

// enqueue queues n events of task (evt_<task>_1…n) for endpoint, as the
// dispatch stage does.
func enqueue(t *testing.T, s *taskstore.Store, endpoint, task string, n int) {
	t.Helper()
	task = tid(task)
	for i := 1; i <= n; i++ {
		ev := testEvent(EventCreated)
		ev.ID, ev.TaskID = fmt.Sprintf("evt_%s_%d", task, i), task
		ok, err := s.EnqueueDelivery(ctx, taskstore.Delivery{EventID: ev.ID, Endpoint: endpoint, TaskID: task, Type: ev.Type,
			Payload: Render(ev, ""), TraceParent: ev.TraceParent}, 48*time.Hour)
		if err != nil || !ok {
			t.Fatalf("enqueue: %v %v", ok, err)
		}
	}
}

func metric(d *Dispatcher, endpoint, event, outcome string) float64 {
	return testutil.ToFloat64(d.Metrics().deliveries.WithLabelValues(endpoint, event, outcome))
}

// TestDeliveredOnce: a queued delivery reaches its receiver once,
// signed, and leaves the queue.
func TestDeliveredOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, taskstore.Options{})
		rc := newReceiver(t)
		d := startDispatcher(t, Config{Store: s, Endpoints: []Endpoint{testEndpoint("a", rc.srv.URL)}})
		enqueue(t, s, "a", "t1", 1)
		waitFor(t, "delivered", func() bool { return metric(d, "a", EventCreated, "delivered") == 1 })
		if rc.delivered() != 1 || rc.ids[evID("t1", 1)] != 1 {
			t.Fatalf("receiver got %v", rc.ids)
		}
		if due, dead, err := s.WebhookQueueStats(ctx, "a"); err != nil || due != 0 || dead != 0 {
			t.Fatalf("queue after delivery: due %d dead %d %v", due, dead, err)
		}
	})
}

// TestRetriedOn500AndTimeout: a 500 and an answer later than the timeout
// are retried, the third attempt delivers.
func TestRetriedOn500AndTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, taskstore.Options{})
		rc := newReceiver(t)
		rc.answer = func(n int, r *http.Request) int {
			switch n {
			case 1:
				return 500
			case 2:
				<-r.Context().Done() // no answer: the client's timeout ends it
				return 200
			}
			return 200
		}
		d := startDispatcher(t, Config{Store: s, Endpoints: []Endpoint{testEndpoint("a", rc.srv.URL)},
			Timeout: 200 * time.Millisecond, FirstRetry: 10 * time.Millisecond})
		enqueue(t, s, "a", "t1", 1)
		waitFor(t, "delivered", func() bool { return metric(d, "a", EventCreated, "delivered") == 1 })
		if r := metric(d, "a", EventCreated, "retried"); r != 2 {
			t.Fatalf("retried %v times, want 2", r)
		}
		if rc.ids[evID("t1", 1)] != 1 {
			t.Fatalf("receiver got %v", rc.ids)
		}
	})
}

// TestOrderedPerTask: one task's events reach the receiver in their
// order, even when attempts fail and several POSTs run at once.
func TestOrderedPerTask(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, taskstore.Options{})
		rc := newReceiver(t)
		rc.answer = func(n int, r *http.Request) int {
			if n%3 == 1 {
				return 503
			}
			return 200
		}
		d := startDispatcher(t, Config{Store: s, Endpoints: []Endpoint{testEndpoint("a", rc.srv.URL)},
			FirstRetry: 5 * time.Millisecond, Concurrency: 4})
		tasks := []string{"ta", "tb", "tc"}
		for _, task := range tasks {
			enqueue(t, s, "a", task, 6)
		}
		waitFor(t, "all delivered", func() bool { return rc.delivered() == 18 })
		next := map[string]int{}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, p := range rc.got {
			next[p.Data.TaskID]++
			if want := fmt.Sprintf("evt_%s_%d", p.Data.TaskID, next[p.Data.TaskID]); p.Data.EventID != want {
				t.Fatalf("task %s: got %s, want %s", p.Data.TaskID, p.Data.EventID, want)
			}
		}
		_ = d
	})
}

// TestDeadAfterWindow: a delivery that keeps failing is a dead letter
// once its retry window is spent (a fake clock), with its last error;
// RetryDead sends it again, and it is delivered.
func TestDeadAfterWindow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := &clock{at: time.Now()}
		s := b.open(t, taskstore.Options{Clock: clk.now})
		rc := newReceiver(t)
		var fail sync.Map
		fail.Store("on", true)
		rc.answer = func(int, *http.Request) int {
			if v, _ := fail.Load("on"); v.(bool) {
				return 500
			}
			return 200
		}
		d := startDispatcher(t, Config{Store: s, Endpoints: []Endpoint{testEndpoint("a", rc.srv.URL)},
			Clock: clk.now, RetryFor: time.Hour})
		enqueue(t, s, "a", "t1", 1)
		waitFor(t, "first attempt", func() bool { return metric(d, "a", EventCreated, "retried") == 1 })
		clk.add(2 * time.Hour) // past the window: the next failure is the last
		waitFor(t, "dead", func() bool { return metric(d, "a", EventCreated, "dead") == 1 })
		dead, err := d.DeadLetters(ctx, "a", 10)
		if err != nil || len(dead) != 1 || dead[0].EventID != evID("t1", 1) || dead[0].LastError != "the receiver answered HTTP 500" {
			t.Fatalf("dead letters: %+v %v", dead, err)
		}
		fail.Store("on", false)
		if err := d.RetryDead(ctx, "a", evID("t1", 1)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "delivered after RetryDead", func() bool { return metric(d, "a", EventCreated, "delivered") == 1 })
		if _, n, _ := s.WebhookQueueStats(ctx, "a"); n != 0 {
			t.Fatalf("%d dead letters left", n)
		}
		if err := d.RetryDead(ctx, "nope", evID("t1", 1)); err == nil {
			t.Fatal("RetryDead of an unknown endpoint succeeded")
		}
	})
}

// TestTwoDispatchersDeliverEachOnce: two replicas' dispatchers on one
// store share the queue: every delivery goes out once.
func TestTwoDispatchersDeliverEachOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		rc := newReceiver(t)
		var ds []*Dispatcher
		for i := range 2 {
			s := b.open(t, taskstore.Options{})
			ds = append(ds, startDispatcher(t, Config{Store: s, Consumer: fmt.Sprintf("r%d", i),
				Endpoints: []Endpoint{testEndpoint("a", rc.srv.URL)}}))
			if i == 0 {
				for k := range 10 {
					enqueue(t, s, "a", fmt.Sprintf("t%d", k), 5)
				}
			}
		}
		waitFor(t, "all delivered", func() bool { return rc.delivered() == 50 })
		waitFor(t, "all recorded", func() bool {
			return metric(ds[0], "a", EventCreated, "delivered")+metric(ds[1], "a", EventCreated, "delivered") == 50
		})
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for id, n := range rc.ids {
			if n != 1 {
				t.Errorf("%s delivered %d times", id, n)
			}
		}
	})
}

// TestSecretsNeverLogged: failures are logged with the endpoint's name,
// never its URL (which may hold a credential) nor its secret.
func TestSecretsNeverLogged(t *testing.T) {
	mr := miniredis.RunT(t)
	s := taskstore.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), taskstore.Options{})
	defer s.Close()
	var logs bytes.Buffer
	var mu sync.Mutex
	w := zerolog.SyncWriter(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) }))
	// A port nothing listens on, and a path that is a credential.
	d := startDispatcher(t, Config{Store: s, Logger: zerolog.New(w).Level(zerolog.DebugLevel), FirstRetry: time.Millisecond,
		Endpoints: []Endpoint{testEndpoint("a", "http://127.0.0.1:1/hooks/T0KEN-IN-PATH")}})
	enqueue(t, s, "a", "t1", 1)
	waitFor(t, "retried", func() bool { return metric(d, "a", EventCreated, "retried") >= 2 })
	d.Stop()
	mu.Lock()
	defer mu.Unlock()
	out := logs.String()
	if !strings.Contains(out, `"endpoint":"a"`) {
		t.Fatalf("no failure logged:\n%s", out)
	}
	for _, secret := range []string{"T0KEN-IN-PATH", strings.TrimPrefix(testSecret, "whsec_")} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q:\n%s", secret, out)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestOutboxToReceivers: status changes recorded by the store's scripts
// reach each endpoint whose filters want them, once each, in order per
// task, with two dispatchers (two replicas) reading the outboxes.
func TestOutboxToReceivers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		all, fails := newReceiver(t), newReceiver(t)
		eps := []Endpoint{testEndpoint("all", all.srv.URL),
			{Name: "fails", URL: fails.srv.URL, Secrets: []string{testSecret}, Events: []string{EventFailed}, Tools: []string{"deploy*"}}}
		var stores []*taskstore.Store
		for i := range 2 {
			s := b.open(t, taskstore.Options{Webhooks: true})
			stores = append(stores, s)
			startDispatcher(t, Config{Store: s, Consumer: fmt.Sprintf("r%d", i), Endpoints: eps, ConsoleURL: "http://console.test"})
		}
		s := stores[0]
		const n = 10
		for i := range n {
			owner := fmt.Sprintf("principal:%064x", i%3)
			task, err := s.Create(ctx, taskstore.NewTask{Owner: owner, Tool: []string{"deploy_prod", "search"}[i%2]})
			if err != nil {
				t.Fatal(err)
			}
			if i < n/2 {
				err = s.Complete(ctx, owner, task.ID, json.RawMessage(`{"content":[]}`))
			} else {
				err = s.Fail(ctx, owner, task.ID, taskstore.Outcome{Error: json.RawMessage(`{"code":-32000,"message":"boom"}`)})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "every event at the catch-all endpoint", func() bool { return all.delivered() == 2*n })
		waitFor(t, "the failed deploys at the filtered one", func() bool { return fails.delivered() == 2 }) // tasks 6 and 8
		all.mu.Lock()
		defer all.mu.Unlock()
		seen := map[string][]string{}
		for _, p := range all.got {
			seen[p.Data.TaskID] = append(seen[p.Data.TaskID], p.Type)
			if p.Data.ConsoleURL != "http://console.test/tasks/"+p.Data.TaskID {
				t.Errorf("consoleUrl %q", p.Data.ConsoleURL)
			}
			if p.Type != EventCreated && p.Data.Result == nil {
				t.Errorf("%s without result metadata", p.Type)
			}
		}
		for task, types := range seen {
			if len(types) != 2 || types[0] != EventCreated || (types[1] != EventCompleted && types[1] != EventFailed) {
				t.Errorf("task %s: events %v", task, types)
			}
		}
		for id, k := range all.ids {
			if k != 1 {
				t.Errorf("%s delivered %d times", id, k)
			}
		}
		fails.mu.Lock()
		defer fails.mu.Unlock()
		for _, p := range fails.got {
			if p.Type != EventFailed || p.Data.Tool != "deploy_prod" {
				t.Errorf("the filtered endpoint got %s of %s", p.Type, p.Data.Tool)
			}
		}
	})
}

// failFirstEnqueue is a store whose first queueing of event fails (Redis
// was away for a moment).
type failFirstEnqueue struct {
	*taskstore.Store
	event  string
	failed bool
}

// EnqueueDeliveries fails, once, the first batch holding event.
func (f *failFirstEnqueue) EnqueueDeliveries(ctx context.Context, ds []taskstore.Delivery, keep time.Duration) ([]bool, error) {
	for _, d := range ds {
		if d.EventID == f.event && !f.failed {
			f.failed = true
			return nil, taskstore.ErrUnavailable
		}
	}
	return f.Store.EnqueueDeliveries(ctx, ds, keep)
}

// TestDispatchKeepsOrderAfterFailedEnqueue: when a task's task.created
// cannot be queued, its task.completed read in the same batch waits too;
// queued alone, it would be the task's head and reach the receiver first.
// The next pass queues both, in order.
func TestDispatchKeepsOrderAfterFailedEnqueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, taskstore.Options{Webhooks: true})
		task, err := s.Create(ctx, taskstore.NewTask{Owner: "principal:" + strings.Repeat("a", 64), Tool: "search"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, task.Owner, task.ID, json.RawMessage(`{"content":[]}`)); err != nil {
			t.Fatal(err)
		}
		first := "evt_" + task.ID + "_1"
		fs := &failFirstEnqueue{Store: s, event: first}
		d, err := New(Config{Store: fs, Consumer: "r1", Endpoints: []Endpoint{testEndpoint("e", "http://127.0.0.1:1/")}})
		if err != nil {
			t.Fatal(err)
		}
		if n := d.dispatchOnce(ctx); n != 2 || !fs.failed {
			t.Fatalf("first pass read %d events (failed %t), want 2 and a failed queueing", n, fs.failed)
		}
		d.dispatchOnce(ctx) // the unacknowledged events again (taskstore reads its own pending at once)
		ds, err := s.ClaimDeliveries(ctx, "e", 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || ds[0].EventID != first {
			var ids []string
			for _, d := range ds {
				ids = append(ids, d.EventID+" "+d.Type)
			}
			t.Fatalf("due first: %v, want only %s (task.created)", ids, first)
		}
	})
}

// TestDoneRecordedThroughRedisBlip: the receiver took the delivery, and
// Redis is away for a moment when the dispatcher records it done (a
// restart). The record is tried again while the claim holds, so the
// delivery leaves the queue without being sent twice; before, the claim
// lapsed and the event went out again (seen in e2e
// TestWebhooksRedisRestart).
func TestDoneRecordedThroughRedisBlip(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	s := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { _ = s.Close(); _ = rdb.Close() })
	rc := newReceiver(t)
	rc.answer = func(n int, r *http.Request) int {
		if n == 1 {
			mr.SetError("LOADING Redis is loading the dataset in memory")
			time.AfterFunc(300*time.Millisecond, func() { mr.SetError("") })
		}
		return 204
	}
	d := startDispatcher(t, Config{Store: s, Endpoints: []Endpoint{testEndpoint("a", rc.srv.URL)}})
	enqueue(t, s, "a", "blip", 1)
	waitFor(t, "recorded delivered", func() bool { return metric(d, "a", EventCreated, "delivered") == 1 })
	if due, _, err := s.WebhookQueueStats(ctx, "a"); err != nil || due != 0 {
		t.Fatalf("queue after the blip: due %d, %v; want empty", due, err)
	}
	rc.mu.Lock()
	calls := rc.calls
	rc.mu.Unlock()
	if calls != 1 {
		t.Fatalf("the receiver got %d POSTs, want 1", calls)
	}
}
