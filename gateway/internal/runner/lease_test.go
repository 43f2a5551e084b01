package runner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/taskstore"
)

// TestWorkerThatLosesItsLeaseAbortsTheCall: a worker paused past its lease
// (a partition, a stalled VM) finds on its next renewal that another
// replica claimed the task. It must stop and abort its upstream call, and
// write no outcome over the new holder's.
func TestWorkerThatLosesItsLeaseAbortsTheCall(t *testing.T) {
	for _, era := range []struct {
		name      string
		stateless bool
	}{{"modern-upstream", true}, {"legacy-upstream", false}} {
		t.Run(era.name, func(t *testing.T) {
			rig := newStoreRig(t, era.stateless, taskstore.Options{}, Params{Lease: 3 * time.Second, Renew: 100 * time.Millisecond})
			rec := rig.rec
			task := rig.toolTask(t, "slow", map[string]any{"seconds": 30})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
				t.Fatal(err)
			}

			// Another replica, whose clock says the lease ran out long ago,
			// claims the task (a minute is past the 3 s lease and its 2 s grace, well within the ttl).
			rdb := redis.NewClient(&redis.Options{Addr: rig.mr.Addr()})
			t.Cleanup(func() { rdb.Close() })
			later := taskstore.New(rdb, taskstore.Options{Clock: func() time.Time { return time.Now().Add(time.Minute) }})
			t.Cleanup(func() { later.Close() })
			owner := rigOwner
			if err := later.Claim(ctx, owner, task.ID, "thief", time.Hour); err != nil {
				t.Fatalf("claim: %v", err)
			}

			if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
				t.Fatalf("the upstream call was not aborted after the lease was lost: %v", err)
			}
			gwtest.WaitMetric(t, rig.metricsURL, "taskgate_held_calls", nil, 0)
			gwtest.WaitMetric(t, rig.metricsURL, "taskgate_tasks_live", map[string]string{"status": "working"}, 0)
			// The task is the new holder's: still working, not failed or
			// completed by the worker that lost it.
			got, err := later.Get(ctx, owner, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != taskstore.StatusWorking || got.Lease.Holder != "thief" {
				t.Errorf("after the lease was lost: status %s, lease holder %q; want working, thief", got.Status, got.Lease.Holder)
			}
		})
	}
}

// evalCounter counts EVALSHA commands sent alone and the sizes of
// pipelines made only of EVALSHA.
type evalCounter struct {
	mu        sync.Mutex
	alone     int
	pipelines []int
}

func (*evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (e *evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			e.mu.Lock()
			e.alone++
			e.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (e *evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		// A renewal: script calls, and the leases index's re-scoring.
		n, all := 0, len(cmds) > 0
		for _, c := range cmds {
			switch c.Name() {
			case "evalsha":
				n++
			case "zadd":
			default:
				all = false
			}
		}
		if all && n > 0 {
			e.mu.Lock()
			e.pipelines = append(e.pipelines, n)
			e.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// full counts the renewal pipelines of n script calls so far.
func (e *evalCounter) full(n int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := 0
	for _, m := range e.pipelines {
		if m == n {
			k++
		}
	}
	return k
}

func (e *evalCounter) reset() (alone int, pipelines []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	alone, pipelines = e.alone, e.pipelines
	e.alone, e.pipelines = 0, nil
	return alone, pipelines
}

// TestLeaseRenewalsBatched: the leases of all the tasks a replica runs are
// renewed in one pipeline per period, not one script call per task.
func TestLeaseRenewalsBatched(t *testing.T) {
	counter := &evalCounter{}
	// A long lease: the recoverer's sweeps find nothing to tidy (its
	// scripts would count as calls alone).
	rig := newStoreRig(t, false, taskstore.Options{}, Params{Lease: time.Minute, Renew: 100 * time.Millisecond}, counter)
	for range 5 {
		rig.toolTask(t, "slow", map[string]any{"seconds": 30})
	}
	gwtest.WaitMetric(t, rig.metricsURL, "taskgate_held_calls", nil, 5)
	counter.reset()
	// About 7 renewal periods, nothing else happening; a busy machine can
	// stretch the periods, so the window lasts until two full renewals
	// were seen (a hang guard only bounds it).
	time.Sleep(700 * time.Millisecond)
	for deadline := time.Now().Add(30 * time.Second); counter.full(5) < 2 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	alone, pipelines := counter.reset()
	full := 0
	for _, n := range pipelines {
		if n == 5 {
			full++
		}
	}
	if alone != 0 || full < 2 {
		t.Fatalf("while 5 tasks were held: %d script calls alone, pipelines %v; want none alone and one pipeline of 5 per period", alone, pipelines)
	}
}
