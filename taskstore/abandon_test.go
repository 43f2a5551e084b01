package taskstore

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestCreateWithLostReplyLeavesNoTask: Redis runs the create script but
// its reply is lost (Redis was killed right after its AOF fsync, and the
// retry found it down). Create fails, so the caller tells its client there
// is no task; the store then removes what the write left, as soon as Redis
// answers, and a late execution of that write is refused. Found by e2e
// TestChaos: such a task stayed, unknown to its client, until a recoverer
// failed it in the name of a replica that had not stopped.
func TestCreateWithLostReplyLeavesNoTask(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	lose := &loseReplyHook{}
	rdb.AddHook(lose)
	s := New(rdb, Options{})
	defer s.Close()
	ctx := context.Background()

	if err := createCmd.Load(ctx, rdb).Err(); err != nil { // EVALSHA runs at once
		t.Fatal(err)
	}
	var live atomic.Bool
	removedIDs := make(chan string, 4)
	stop, err := s.WatchRemovals(ctx, Removals{Removed: func(id string) { removedIDs <- id }, Live: live.Store})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for deadline := time.Now().Add(5 * time.Second); !live.Load(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the removal notices never became live")
		}
	}
	lose.on.Store(true)
	_, err = s.Create(ctx, NewTask{Owner: "alice", Tool: "slow", Protocol: Protocol2026,
		Lease: &LeaseRequest{Holder: "r1", Duration: time.Minute}})
	lose.on.Store(false)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Create with its reply lost = %v, want ErrUnavailable", err)
	}
	id, _ := lose.id.Load().(string)
	if !lose.landed.Load() {
		t.Fatal("the create script did not run (the test's premise)")
	}
	// The write did land (that is the premise) and is then removed.
	deadline := time.Now().Add(10 * time.Second)
	for mr.Exists(s.k.task("alice", id)) || mr.Exists(s.k.created("alice")) && isZMember(mr, s.k.created("alice"), id) ||
		mr.Exists(s.k.active("alice")) && isZMember(mr, s.k.active("alice"), id) {
		if time.Now().After(deadline) {
			t.Fatalf("task %s still in Redis 10 s after its Create failed", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The removal was announced, for caches of terminal tasks.
	select {
	case got := <-removedIDs:
		if got != id {
			t.Errorf("removal notice for %q, want %q", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Error("no removal notice for the abandoned task")
	}
	// The lost write, executed late (a command queued on a cut
	// connection), creates nothing.
	ks := s.withRecords(s.k.createKeys("alice", id), "alice", id, true)
	vals, err := createCmd.Run(ctx, rdb, ks, id, 0, 60000, 86400000, -1, 0, "1", opsMember("alice", id), "", "", fID, id, fOwner, "alice", fStatus, "working").Slice()
	if err != nil || code(vals) != codeExists || mr.Exists(ks[0]) {
		t.Errorf("a late create after the abandon = %v %v (task exists: %t), want refused (exists)", vals, err, mr.Exists(ks[0]))
	}
	// The owner's cap does not count it.
	if n, _ := rdb.ZCard(ctx, s.k.active("alice")).Result(); n != 0 {
		t.Errorf("active index holds %d tasks", n)
	}
}

func isZMember(mr *miniredis.Miniredis, key, member string) bool {
	members, _ := mr.ZMembers(key)
	for _, m := range members {
		if m == member {
			return true
		}
	}
	return false
}

// loseReplyHook, while on, lets a pipeline with the create script run and
// then reports io.EOF, as a connection cut before the reply does.
type loseReplyHook struct {
	on     atomic.Bool
	landed atomic.Bool
	id     atomic.Value // the created task's id
}

func (*loseReplyHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*loseReplyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (l *loseReplyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !l.on.Load() {
			return next(ctx, cmds)
		}
		err := next(ctx, cmds)
		for _, c := range cmds {
			if c.Name() == "evalsha" || c.Name() == "eval" {
				if vals, e := c.(*redis.Cmd).Slice(); e == nil && code(vals) == 0 {
					l.landed.Store(true)
					n, _ := c.Args()[2].(int) // evalsha sha numkeys k1 … kn ARGV[1]=id
					l.id.Store(c.Args()[3+n].(string))
				}
			}
			c.SetErr(io.EOF)
		}
		if err == nil {
			err = io.EOF
		}
		return err
	}
}
