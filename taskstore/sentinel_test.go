package taskstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
)

// TestSentinel runs the store through a redis+sentinel:// URL against a
// live Sentinel, a master and its replica, then fails the master over: the
// client follows the Sentinel to the promoted replica, and a task written
// (and replicated, WAIT) before the failover is still there and can finish.
func TestSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sentinel")
	}
	sen := redistest.StartSentinel(t)
	o, err := ParseURL("redis+sentinel://" + sen.Addr + "/" + sen.Master)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewUniversalClient(o)
	if _, ok := rdb.(*redis.Client); !ok || o.MasterName != sen.Master {
		t.Fatalf("client is %T for master %q, want a failover client", rdb, o.MasterName)
	}
	defer rdb.Close()
	s := New(rdb, Options{ResyncInterval: time.Minute})
	defer s.Close()

	task, err := s.Create(ctx, NewTask{Owner: "alice", Tool: "slow"})
	if err != nil {
		t.Fatalf("Create through the sentinel: %v", err)
	}
	if n, err := rdb.(*redis.Client).Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}

	// The master dies; the Sentinel promotes the replica.
	sen.Primary.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m, err := sen.CurrentMaster(); err == nil && m == sen.Replica.Addr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sentinel did not promote the replica in 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The client finds the new master (retrying: it may first try the dead
	// one, or the replica before it accepted writes).
	var got *Task
	for {
		err = s.Complete(ctx, "alice", task.ID, []byte(`{"content":[]}`))
		if err == nil {
			got, err = s.Get(ctx, "alice", task.ID)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store after the failover: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got.Status != StatusCompleted {
		t.Errorf("task after the failover: %s", got.Status)
	}
}
