package console

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/taskstore"
)

// stream opens an event stream and returns its lines as they come, and
// a stop that ends it.
func (f *fixture) stream(path, auth string) (*http.Response, <-chan string, func()) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return resp, lines, func() { cancel(); resp.Body.Close() }
}

// await reads lines until one equals want; the deadline is generous: it
// only keeps a broken stream from hanging the test.
func await(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended before %q", want)
			}
			if l == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %q on the stream", want)
		}
	}
}

func TestLiveAccess(t *testing.T) {
	f := newFixture(t, token, nil)
	tk := f.create(authOwner, "slow")
	for _, p := range []string{"/live/tasks", "/live/tasks/" + tk.ID} {
		if resp, _ := f.do("GET", p, "Bearer wrong", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token = %d", p, resp.StatusCode)
		}
		if resp, _ := f.do("GET", p, "", nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("GET %s without credentials = %d", p, resp.StatusCode)
		}
	}
	if resp, _ := f.do("GET", "/live/tasks/00000000-0000-4000-8000-000000000000", "Bearer "+token, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown task's stream = %d", resp.StatusCode)
	}
	if resp, _ := f.do("GET", "/live/tasks?status=bogus", "Bearer "+token, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad filter's stream = %d", resp.StatusCode)
	}
}

// TestLiveTask: a task's stream says "change" when the task changes
// (its events), and "end" once it is terminal, then closes.
func TestLiveTask(t *testing.T) {
	f := newFixture(t, token, nil)
	ctx := context.Background()
	tk := f.create(authOwner, "slow")
	resp, lines, stop := f.stream("/live/tasks/"+tk.ID, "Bearer "+token)
	defer stop()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	await(t, lines, ": ping") // the stream is open (and subscribed)
	if err := f.store.AddInputRequests(ctx, authOwner, tk.ID, map[string]taskstore.InputRequest{"k": {Method: "elicitation/create"}}, "", ""); err != nil {
		t.Fatal(err)
	}
	await(t, lines, "event: change")
	if err := f.store.Complete(ctx, authOwner, tk.ID, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	await(t, lines, "event: end")
	for range lines { // the server closes it
	}
}

// TestLiveTasks: the list's stream says "change" when a new task shows,
// and pings while nothing changes.
func TestLiveTasks(t *testing.T) {
	f := newFixture(t, "", func(c *Config) { c.LivePoll = 20 * time.Millisecond; c.Heartbeat = 20 * time.Millisecond })
	f.create(authOwner, "slow")
	_, lines, stop := f.stream("/live/tasks?tool=slow", "")
	defer stop()
	await(t, lines, ": ping")
	await(t, lines, ": ping")   // a heartbeat, not only the opening one
	f.create(authOwner, "fast") // another tool: the filtered page is the same
	f.create(sessionOwner, "slow")
	await(t, lines, "event: change")
}

// TestLiveBounded: streams beyond MaxLive are refused with 503, and a
// stream's slot comes back once its client goes.
func TestLiveBounded(t *testing.T) {
	f := newFixture(t, "", func(c *Config) { c.MaxLive = 1 })
	f.create(authOwner, "slow")
	_, lines, stop := f.stream("/live/tasks", "")
	await(t, lines, ": ping")
	if resp, _ := f.do("GET", "/live/tasks", "", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a second stream over MaxLive = %d, want 503", resp.StatusCode)
	}
	stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, lines, stop := f.stream("/live/tasks", "")
		if resp.StatusCode == http.StatusOK {
			await(t, lines, ": ping")
			stop()
			break
		}
		stop()
		if time.Now().After(deadline) {
			t.Fatal("the slot of a closed stream never came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTimelinePage: the task page shows the timeline: input requests with
// their methods, answered, the operator's cancel; never an answer's
// content; hostile text escaped.
func TestTimelinePage(t *testing.T) {
	const hostile = `<script>alert(1)</script>`
	f := newFixture(t, token, nil)
	ctx := context.Background()
	tk := f.create(authOwner, hostile)
	if err := f.store.AddInputRequests(ctx, authOwner, tk.ID, map[string]taskstore.InputRequest{
		"key" + hostile: {Method: "elicitation/create", Params: json.RawMessage(`{"message":"PARAMS-SECRET"}`)}}, hostile, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.AnswerInputs(ctx, authOwner, tk.ID, map[string]json.RawMessage{"key" + hostile: json.RawMessage(`{"action":"accept","content":{"pw":"ANSWER-SECRET"}}`)}); err != nil {
		t.Fatal(err)
	}
	if err := f.store.SetProgress(ctx, authOwner, tk.ID, json.RawMessage(`{"progress":1,"message":"`+strings.ReplaceAll(hostile, `"`, `\"`)+`"}`), ""); err != nil {
		t.Fatal(err)
	}
	if resp, _ := f.do("POST", "/tasks/"+tk.ID+"/cancel", "Bearer "+token, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel = %d", resp.StatusCode)
	}
	_, body := f.do("GET", "/tasks/"+tk.ID, "Bearer "+token, nil)
	for _, want := range []string{"Created (working)", "(elicitation/create) sent to the client", "answered",
		"Status <strong>input_required</strong>: &lt;script&gt;", "Progress <code>", "Cancelled by the operator</strong>: " + CancelMessage,
		"<dt>Attempts</dt><dd>1</dd>", `data-live="/live/tasks/` + tk.ID + `"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the task page lacks %q", want)
		}
	}
	for _, secret := range []string{"PARAMS-SECRET", "ANSWER-SECRET", "<script>"} {
		if strings.Contains(body, secret) {
			t.Errorf("the task page shows %q", secret)
		}
	}
	order := []string{"Created (working)", "sent to the client", "</code> answered", "Progress <code>", "Cancelled by the operator</strong>"}
	for i := 1; i < len(order); i++ {
		if strings.Index(body, order[i-1]) > strings.Index(body, order[i]) {
			t.Errorf("%q shows after %q", order[i-1], order[i])
		}
	}
}

// TestAttemptsColumn: the list shows a record's attempts field, 1 without.
func TestAttemptsColumn(t *testing.T) {
	f := newFixture(t, "", nil)
	a := f.create(authOwner, "once")
	b := f.create(authOwner, "thrice")
	sum := sha256.Sum256([]byte(authOwner))
	key := "tg:{" + hex.EncodeToString(sum[:16]) + "}:t:" + b.ID
	if err := f.rdb.HSet(context.Background(), key, "attempts", 3).Err(); err != nil {
		t.Fatal(err)
	}
	_, body := f.do("GET", "/", "", nil)
	row := func(id string) string {
		i := strings.Index(body, "/tasks/"+id)
		j := strings.Index(body[i:], "</tr>")
		return body[i : i+j]
	}
	if !strings.HasSuffix(strings.TrimSpace(row(b.ID)), "<td>3</td>") || !strings.HasSuffix(strings.TrimSpace(row(a.ID)), "<td>1</td>") {
		t.Errorf("attempts column:\n%s\n%s", row(a.ID), row(b.ID))
	}
}

// TestReplicasDetails: a replica's heartbeat shows its version, held
// calls against its limit, leases, last sweep, store and upstream state;
// a replica seen only through its latency publishes says so.
func TestReplicasDetails(t *testing.T) {
	f := newFixture(t, token, nil)
	ctx := context.Background()
	if err := f.store.PublishReplica(ctx, taskstore.ReplicaStatus{ID: "r-1", Version: "v<b>9</b>", Held: 7, MaxInflight: 1000, Leases: 5,
		LastSweep: time.Now(), Store: "redis, connections: 4 open, 2 idle", UpstreamUp: true}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := f.store.PublishReplica(ctx, taskstore.ReplicaStatus{ID: "r-2", Version: "v1", UpstreamUp: false}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := f.store.PublishLatencies(ctx, "r-old", map[string][]byte{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	_, body := f.do("GET", "/replicas", "Bearer "+token, nil)
	for _, want := range []string{"v&lt;b&gt;9&lt;/b&gt;", "<td>7 / 1000</td>", "<td>5</td>", "redis, connections: 4 open, 2 idle",
		"<td>up</td>", `<strong class="bad">down</strong>`, "no limit", "not yet", "r-old", "no heartbeat"} {
		if !strings.Contains(body, want) {
			t.Errorf("the replicas page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<b>") {
		t.Error("markup from a heartbeat rendered")
	}
}

// TestFailuresExpired: the failures page groups failed tasks by message
// and lists tasks whose ttl elapsed before they ended.
func TestFailuresExpired(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	f := newFixture(t, "", nil)
	st := taskstore.New(f.rdb, taskstore.Options{Clock: clock})
	defer st.Close()
	con, err := New(Config{Store: st, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	f.con, f.srv = con, newServer(t, con)
	ctx := context.Background()
	mk := func(tool string, ttl time.Duration) *taskstore.Task {
		tk, err := st.Create(ctx, taskstore.NewTask{Owner: authOwner, Tool: tool, Protocol: taskstore.Protocol2026, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	lost := mk("lost<i>tool</i>", time.Second)
	for i := 0; i < 3; i++ {
		tk := mk("flaky", time.Hour)
		if err := st.Fail(ctx, authOwner, tk.ID, taskstore.Outcome{Message: "upstream <b>500</b>"}); err != nil {
			t.Fatal(err)
		}
	}
	other := mk("x", time.Hour)
	if err := st.Fail(ctx, authOwner, other.ID, taskstore.Outcome{Message: "bad input"}); err != nil {
		t.Fatal(err)
	}
	now.Add(2000)
	mk("next", time.Hour) // drops the lost task from the index, remembering it
	_, body := f.do("GET", "/failures", "", nil)
	for _, want := range []string{"3 × upstream &lt;b&gt;500&lt;/b&gt;", "1 × bad input", "1 × " + expiredMessage, lost.ID, "lost&lt;i&gt;tool&lt;/i&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("the failures page lacks %q:\n%s", want, body)
		}
	}
	if strings.Index(body, "upstream &lt;b&gt;") > strings.Index(body, "bad input") {
		t.Error("the largest group is not first")
	}
}

// TestPagingAt100kOnRedisServer: the tasks page over 100k live tasks of
// 500 owners on redis-server: every page, wherever it starts, shows 50
// rows and costs the same few Redis commands.
func TestPagingAt100kOnRedisServer(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 100k tasks on redis-server")
	}
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t), PoolSize: 32})
	defer rdb.Close()
	st := taskstore.New(rdb, taskstore.Options{MaxTasksPerOwner: -1})
	defer st.Close()
	ctx := context.Background()
	const n, workers = 100_000, 16
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if _, err := st.Create(ctx, taskstore.NewTask{Owner: fmt.Sprintf("auth:%d", i%500), Tool: fmt.Sprintf("tool%d", i%7),
					Protocol: taskstore.Protocol2026, TTL: time.Hour}); err != nil {
					failed.Store(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	counter := &countHook{}
	rdb.AddHook(counter)
	con, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, store: st, con: con}
	f.srv = newServer(t, con)
	next, seen := "/", map[string]bool{}
	for page := 0; page < 40 && next != ""; page++ {
		counter.n.Store(0)
		_, body := f.do("GET", next, "", nil)
		rows := strings.Count(body, `<tr class="s-`)
		if rows != 50 {
			t.Fatalf("page %d shows %d rows", page, rows)
		}
		if c := counter.n.Load(); c > 4 {
			t.Fatalf("page %d cost %d Redis round trips", page, c)
		}
		for _, part := range strings.Split(body, `href="/tasks/`)[1:] {
			id := part[:36]
			if seen[id] {
				t.Fatalf("page %d repeats %s", page, id)
			}
			seen[id] = true
		}
		next = ""
		if i := strings.Index(body, `rel="next"`); i >= 0 {
			j := strings.LastIndex(body[:i], `href="`)
			next = strings.ReplaceAll(body[j+6:i-2], "&amp;", "&")
		}
	}
	// A filtered page reads a bounded number of index entries.
	counter.n.Store(0)
	if resp, body := f.do("GET", "/?status=working&tool=tool3", "", nil); resp.StatusCode != http.StatusOK || strings.Count(body, `<tr class="s-`) == 0 {
		t.Fatalf("filtered page = %d", resp.StatusCode)
	}
	if c := counter.n.Load(); c > 2*opsScanRoundTrips {
		t.Errorf("a filtered page cost %d round trips", c)
	}
}

// opsScanRoundTrips bounds a filtered page's round trips: the store reads
// at most 20 index entries per row shown, a page's worth per two round
// trips.
const opsScanRoundTrips = 2 * 20

// countHook counts the round trips (commands and pipelines) to Redis.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}
