package taskstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
)

func TestOpsIndex(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.store(t)
		mk := func(owner, tool string, ttl time.Duration) *Task {
			t.Helper()
			task, err := s.Create(ctx, NewTask{Owner: owner, Tool: tool, Protocol: Protocol2026, TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			e.elapse(time.Millisecond) // distinct created times
			return task
		}
		short := mk("session:secret-sid", "slow", 50*time.Millisecond)
		a := mk("session:secret-sid", "slow", time.Minute)
		b := mk("auth:bob", "fast", time.Minute)
		c := mk("auth:bob", "slow", time.Minute)
		d := mk("auth:carol", "slow", time.Minute)
		if err := s.Fail(ctx, "auth:bob", b.ID, Outcome{Message: "boom"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RequestCancel(ctx, "auth:bob", c.ID, "by the operator"); err != nil {
			t.Fatal(err)
		}
		if err := s.AddInputRequests(ctx, "auth:carol", d.ID, map[string]InputRequest{"k": {Method: "elicitation/create"}}, "", ""); err != nil {
			t.Fatal(err)
		}
		ids := func(q OpsQuery) []string {
			t.Helper()
			p, err := s.OpsList(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, task := range p.Tasks {
				out = append(out, task.ID)
			}
			return out
		}
		want := func(q OpsQuery, w ...*Task) {
			t.Helper()
			var ws []string
			for _, task := range w {
				ws = append(ws, task.ID)
			}
			if got := ids(q); fmt.Sprint(got) != fmt.Sprint(ws) {
				t.Errorf("OpsList(%+v) = %v, want %v", q, got, ws)
			}
		}
		want(OpsQuery{}, d, c, b, a, short)
		want(OpsQuery{Status: StatusFailed}, b)
		want(OpsQuery{Status: StatusCancelled}, c)
		want(OpsQuery{Status: StatusInputRequired}, d)
		want(OpsQuery{Status: StatusWorking}, a, short)
		want(OpsQuery{Tool: "fast"}, b)
		want(OpsQuery{Limit: 2}, d, c)
		p, _ := s.OpsList(ctx, OpsQuery{Limit: 2})
		want(OpsQuery{Limit: 2, Cursor: p.Next}, b, a)
		if _, err := s.OpsList(ctx, OpsQuery{Cursor: "x.y"}); !errors.Is(err, ErrBadCursor) {
			t.Errorf("bad cursor: %v", err)
		}
		if _, err := s.OpsList(ctx, OpsQuery{Status: "nope"}); !errors.Is(err, ErrBadFilter) {
			t.Errorf("bad status: %v", err)
		}
		got, err := s.OpsFind(ctx, b.ID)
		if err != nil || got.Owner != "auth:bob" || got.StatusMessage != "boom" {
			t.Errorf("OpsFind = %+v, %v", got, err)
		}
		// The owner itself (a session id here) is never in the index.
		for _, k := range s.k.ops() {
			if dump := fmt.Sprint(e.rdb.ZRange(ctx, k, 0, -1).Val(), e.rdb.HGetAll(ctx, k).Val()); strings.Contains(dump, "secret-sid") {
				t.Errorf("%s holds the owner: %s", k, dump)
			}
		}
		// Trimmed with the ttl: the short task leaves the index at the
		// next create once its ttl has elapsed.
		e.elapse(100 * time.Millisecond)
		if _, err := s.OpsFind(ctx, short.ID); err == nil {
			t.Error("an expired task is still found")
		}
		mk("auth:bob", "slow", time.Minute)
		for i, k := range s.k.ops() {
			if i != 2 && i != 7 && e.isMember(k, opsMember(short.Owner, short.ID)) {
				t.Errorf("%s still holds the expired task", k)
			}
		}
		if e.rdb.HExists(ctx, s.k.ops()[2], short.ID).Val() {
			t.Error("ids still holds the expired task")
		}
	})
}

// TestOpsPagingAt100k walks an index of 100k live tasks on redis-server
// page by page: every page costs the same two round trips and reads only
// its own tasks, wherever it starts.
func TestOpsPagingAt100k(t *testing.T) {
	if testing.Short() {
		t.Skip("fills redis-server with 100k tasks")
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t)})
	defer rdb.Close()
	counter := &cmdCounter{}
	rdb.AddHook(counter)
	s := New(rdb, Options{MaxTasksPerOwner: -1})
	defer s.Close()
	if err := createCmd.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	now := time.Now().UnixMilli()
	for i := 0; i < n; i += 1000 {
		pipe := rdb.Pipeline()
		for j := i; j < i+1000; j++ {
			owner := fmt.Sprintf("auth:%d", j%500)
			id := fmt.Sprintf("00000000-0000-4000-8000-%012d", j)
			created := now - int64(n-j) // the last one is the newest
			tool := fmt.Sprintf("tool%d", j%7)
			ks := s.withRecords(s.k.createKeys(owner, id), owner, id, true)
			pipe.EvalSha(ctx, createCmd.Hash(), ks, id, created, 3_600_000, 86_400_000, -1, 0, "1", opsMember(owner, id), tool, "",
				fID, id, fOwner, owner, fTool, tool, fStatus, "working", fCreated, created, fUpdated, created, fTTL, 3_600_000)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if c := rdb.ZCard(ctx, s.k.ops()[0]).Val(); c != n {
		t.Fatalf("index holds %d, want %d", c, n)
	}
	seen := 0
	cursor := ""
	next := n - 1
	for pages := 0; ; pages++ {
		counter.reset()
		p, err := s.OpsList(ctx, OpsQuery{Limit: 1000, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if pipes, cmds := counter.get(); len(p.Tasks) > 0 && (pipes > 3 || cmds > len(p.Tasks)+4) {
			t.Fatalf("page %d: %d round trips, %d commands for %d tasks", pages, pipes, cmds, len(p.Tasks))
		}
		for _, task := range p.Tasks {
			if want := fmt.Sprintf("00000000-0000-4000-8000-%012d", next); task.ID != want {
				t.Fatalf("page %d: %s, want %s", pages, task.ID, want)
			}
			next--
			seen++
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if seen != n {
		t.Fatalf("walked %d tasks, want %d", seen, n)
	}
	// A filtered page reads a bounded number of index entries.
	counter.reset()
	if _, err := s.OpsList(ctx, OpsQuery{Limit: 10, Tool: "no-such-tool"}); err != nil {
		t.Fatal(err)
	}
	if _, cmds := counter.get(); cmds > 10*opsScanFactor+2*opsScanFactor+2 {
		t.Fatalf("a filtered page sent %d commands", cmds)
	}
}

// cmdCounter counts round trips (a command or pipeline) and commands.
type cmdCounter struct {
	pipes, cmds int
}

func (c *cmdCounter) reset()          { c.pipes, c.cmds = 0, 0 }
func (c *cmdCounter) get() (int, int) { return c.pipes, c.cmds }
func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook {
	return next
}
func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.pipes++
		c.cmds++
		return next(ctx, cmd)
	}
}
func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.pipes++
		c.cmds += len(cmds)
		return next(ctx, cmds)
	}
}

// BenchmarkOpsIndex measures what the operator's index adds to Create,
// Get and Complete, as ratios against the same store without it,
// interleaved (order alternating) in one run on one redis-server.
func BenchmarkOpsIndex(b *testing.B) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(b)})
	defer rdb.Close()
	with := New(rdb, Options{MaxTasksPerOwner: -1})
	defer with.Close()
	without := New(rdb, Options{MaxTasksPerOwner: -1, Prefix: "tgx"})
	defer without.Close()
	without.SetOpsRecords(false)
	var spent [2][3]time.Duration // store, op
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			j := (i + k) % 2
			s := []*Store{with, without}[j]
			start := time.Now()
			task, err := s.Create(ctx, NewTask{Owner: "bench", Tool: "slow", Protocol: Protocol2026, TTL: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := s.Get(ctx, "bench", task.ID); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			if err := s.Complete(ctx, "bench", task.ID, json.RawMessage(`{}`)); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			spent[j][0] += t1.Sub(start)
			spent[j][1] += t2.Sub(t1)
			spent[j][2] += t3.Sub(t2)
		}
	}
	for op, name := range []string{"create", "get", "complete"} {
		b.ReportMetric(float64(spent[0][op])/float64(spent[1][op]), name+"-index/noindex")
	}
}
