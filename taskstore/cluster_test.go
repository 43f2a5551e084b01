package taskstore

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
)

// clusterClient starts a real 3-master Redis Cluster (skipped with
// -short) and returns a client of it made from a redis+cluster:// URL, as
// serve makes one.
func clusterClient(t *testing.T) redis.UniversalClient {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	addrs := redistest.StartCluster(t, 3)
	o, err := ParseURL("redis+cluster://" + addrs[0] + "," + addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewUniversalClient(o)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestCluster runs the main paths against a real 3-master Redis Cluster
// through a URL of the redis+cluster:// form: every script must stay in one
// slot, the leases index lives in another, and PUBLISH inside scripts must
// reach the shared pub/sub connection wherever it sits.
func TestCluster(t *testing.T) {
	rdb := clusterClient(t)
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("client is %T", rdb)
	}
	s := New(rdb, Options{ResyncInterval: time.Minute, LeaseGrace: 10 * time.Millisecond})
	defer s.Close()
	// The operator's index is in its own slot: no script can write it
	// with a task, so the store keeps none (ops.go) and says so.
	if _, err := s.OpsList(ctx, OpsQuery{}); s.OpsEnabled() || !errors.Is(err, ErrOpsDisabled) {
		t.Fatalf("OpsList on Cluster = %v (enabled %t), want ErrOpsDisabled", err, s.OpsEnabled())
	}
	if s.RecordsEnabled() {
		t.Error("timelines kept on Cluster, where the console cannot find a task to show one")
	}
	// Replicas' heartbeats work on Cluster: the records and their set are
	// in several slots, written by separate commands.
	for _, id := range []string{"r-a", "r-b", "r-c"} {
		if err := s.PublishReplica(ctx, ReplicaStatus{ID: id, Version: "v"}, time.Minute); err != nil {
			t.Fatalf("PublishReplica on Cluster: %v", err)
		}
	}
	if rs, err := s.Replicas(ctx, time.Minute); err != nil || len(rs) != 3 {
		t.Fatalf("Replicas on Cluster = %+v, %v", rs, err)
	}

	owners := []string{"alice", "bob", "carol", "dave"} // spread over slots
	// One ExtendMany renews leases on every shard.
	var refs []LeaseRef
	for _, owner := range owners {
		owner += "-leases"
		task, err := s.Create(ctx, NewTask{Owner: owner, Tool: "slow", Lease: &LeaseRequest{Holder: "r9", Duration: time.Minute}})
		if err != nil {
			t.Fatalf("%s: Create: %v", owner, err)
		}
		refs = append(refs, LeaseRef{owner, task.ID})
	}
	for i, err := range s.ExtendMany(ctx, refs, "r9", time.Hour) {
		if err != nil {
			t.Fatalf("ExtendMany %s: %v", refs[i].Owner, err)
		}
	}
	for _, owner := range owners {
		task, err := s.Create(ctx, NewTask{Owner: owner, Tool: "slow", Lease: &LeaseRequest{Holder: "r1", Duration: time.Millisecond}})
		if err != nil {
			t.Fatalf("%s: Create: %v", owner, err)
		}
		if _, err := s.Get(ctx, owner, task.ID); err != nil {
			t.Fatalf("%s: Get: %v", owner, err)
		}
		if list, _, err := s.List(ctx, owner, "", 10); err != nil || len(list) != 1 {
			t.Fatalf("%s: List: %v, %v", owner, list, err)
		}
		if err := s.PutUpstreamTask(ctx, UpstreamTask{ID: "up-" + owner, Owner: owner, Session: "s"}, time.Minute); err != nil {
			t.Fatalf("%s: PutUpstreamTask: %v", owner, err)
		}
		if list, _, err := s.List(ctx, owner, "", 10); err != nil || len(list) != 2 || list[0].Upstream == nil {
			t.Fatalf("%s: List with an upstream task: %v, %v", owner, list, err)
		}
		if mine, anyone, err := s.UpstreamTaskOwner(ctx, owner, "up-"+owner); err != nil || mine == nil || !anyone {
			t.Fatalf("%s: UpstreamTaskOwner: %v, %v, %v", owner, mine, anyone, err)
		}
		if err := s.AddInputRequests(ctx, owner, task.ID, map[string]InputRequest{"k": {Method: "elicitation/create"}}, "", ""); err != nil {
			t.Fatalf("%s: AddInputRequests: %v", owner, err)
		}
		if n, err := s.AnswerInputs(ctx, owner, task.ID, map[string]json.RawMessage{"k": json.RawMessage(`{}`)}); err != nil || n != 1 {
			t.Fatalf("%s: AnswerInputs: %d, %v", owner, n, err)
		}

		done := make(chan error, 1)
		go func() {
			_, err := s.WaitFor(ctx, owner, task.ID, IsTerminal)
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		if err := s.Complete(ctx, owner, task.ID, json.RawMessage(`{}`)); err != nil {
			t.Fatalf("%s: Complete: %v", owner, err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: WaitFor: %v", owner, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: waiter not woken in cluster", owner)
		}
	}

	// A leased, non-terminal task is found by recovery across slots.
	task, err := s.Create(ctx, NewTask{Owner: "erin"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Claim(ctx, "erin", task.ID, "r1", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	exp, err := s.ListExpiredLeases(ctx, 100)
	if err != nil || len(exp) != 1 || exp[0].ID != task.ID {
		t.Fatalf("ListExpiredLeases = %+v, %v", exp, err)
	}

	// Latencies: each replica's hash in its own slot, the index in another.
	for _, r := range []string{"r1", "r2", "r3"} {
		if err := s.PublishLatencies(ctx, r, map[string][]byte{"slow": []byte(r)}, time.Minute); err != nil {
			t.Fatalf("PublishLatencies %s: %v", r, err)
		}
	}
	lat, err := s.LoadLatencies(ctx, "r1", time.Minute)
	if err != nil || len(lat) != 2 || string(lat["r3"]["slow"]) != "r3" {
		t.Fatalf("LoadLatencies = %q, %v", lat, err)
	}
}
