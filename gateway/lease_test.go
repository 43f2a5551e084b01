package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// TestWorkerThatLosesItsLeaseAbortsTheCall: a worker paused past its lease
// (a partition, a stalled VM) finds on its next renewal that another
// replica claimed the task. It must stop and abort its upstream call, and
// write no outcome over the new holder's.
func TestWorkerThatLosesItsLeaseAbortsTheCall(t *testing.T) {
	for _, era := range upstreamEras {
		t.Run(era.name, func(t *testing.T) {
			rec := &testupstream.Recorder{}
			up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: era.stateless, Recorder: rec}))
			t.Cleanup(up.Close)
			f := newFleet(t, up.URL+"/mcp")
			f.add(func(c *Config) {
				c.Policy = rulesPolicy(rules(t, "slow", policy.Task))
				c.Lease, c.LeaseRenew = 3*time.Second, 100*time.Millisecond
			})
			c := &modernClient{t: t, urls: f.urls, auth: "Bearer lease"}
			task := c.toolTask("slow", map[string]any{"seconds": 30})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
				t.Fatal(err)
			}

			// Another replica, whose clock says the lease ran out long ago,
			// claims the task (a minute is past the 3 s lease and its 2 s grace, well within the ttl).
			rdb := redis.NewClient(&redis.Options{Addr: f.mr.Addr()})
			t.Cleanup(func() { rdb.Close() })
			later := taskstore.New(rdb, taskstore.Options{Clock: func() time.Time { return time.Now().Add(time.Minute) }})
			t.Cleanup(func() { later.Close() })
			sum := sha256.Sum256([]byte("Bearer lease"))
			owner := "auth:" + hex.EncodeToString(sum[:])
			if err := later.Claim(ctx, owner, task.TaskID, "thief", time.Hour); err != nil {
				t.Fatalf("claim: %v", err)
			}

			if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
				t.Fatalf("the upstream call was not aborted after the lease was lost: %v", err)
			}
			waitMetric(t, f.urls[0], "taskgate_held_calls", nil, 0)
			waitMetric(t, f.urls[0], "taskgate_tasks_live", map[string]string{"status": "working"}, 0)
			// The task is the new holder's: still working, not failed or
			// completed by the worker that lost it.
			got, err := later.Get(ctx, owner, task.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != taskstore.StatusWorking || got.Lease.Holder != "thief" {
				t.Errorf("after the lease was lost: status %s, lease holder %q; want working, thief", got.Status, got.Lease.Holder)
			}
		})
	}
}
