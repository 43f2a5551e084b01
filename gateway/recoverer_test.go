package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

func TestRecovererFailsTasksOfADeadReplica(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	now := time.Now()
	clock := func() time.Time { return now }
	store := taskstore.New(rdb, taskstore.Options{Clock: clock, LeaseGrace: time.Second})
	defer store.Close()
	ctx := context.Background()

	// A task whose worker, on replica "dead", held a 2 s lease.
	dead, err := store.Create(ctx, taskstore.NewTask{Owner: "o", Tool: "slow", Flavour: taskstore.FlavourLegacy,
		Lease: &taskstore.LeaseRequest{Holder: "dead", Duration: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	// And one whose worker is alive and renews.
	alive, err := store.Create(ctx, taskstore.NewTask{Owner: "o", Tool: "slow", Flavour: taskstore.FlavourLegacy,
		Lease: &taskstore.LeaseRequest{Holder: "alive", Duration: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	up, _ := upstream.New("http://127.0.0.1:1/mcp", upstream.Options{})
	h, err := New(Config{Upstream: up, Store: store, ReplicaID: "survivor", Lease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	// Within the lease plus grace nothing happens, even with skew.
	now = now.Add(2500 * time.Millisecond)
	if n := h.recoverOnce(ctx); n != 0 {
		t.Fatalf("recovered %d tasks before their lease and grace ran out", n)
	}
	if err := store.Extend(ctx, "o", alive.ID, "alive", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second) // dead's lease + grace is over; alive's is not
	if n := h.recoverOnce(ctx); n != 1 {
		t.Fatalf("recovered %d tasks, want 1", n)
	}
	got, err := store.Get(ctx, "o", dead.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != taskstore.StatusFailed || !strings.Contains(got.StatusMessage, "replica running the task (dead) stopped") ||
		!strings.Contains(string(got.Error), "-32603") {
		t.Errorf("dead replica's task = %s %q %s", got.Status, got.StatusMessage, got.Error)
	}
	if got, _ := store.Get(ctx, "o", alive.ID); got.Status != taskstore.StatusWorking {
		t.Errorf("a live worker's task was recovered: %s", got.Status)
	}
	if n := h.recoverOnce(ctx); n != 0 {
		t.Errorf("a second sweep recovered %d more", n)
	}
}
