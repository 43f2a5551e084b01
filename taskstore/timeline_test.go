package taskstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTimeline follows a task through input requests, progress and an
// operator's cancel, and reads its timeline back: every change in order,
// methods and keys but never params or answers, progress kept as one
// entry, the cancel by the operator; the list expires with the task.
func TestTimeline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.store(t)
		task, err := s.Create(ctx, NewTask{Owner: "auth:a", Tool: "t", Protocol: Protocol2026, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		step := func() { e.elapse(time.Millisecond) }
		step()
		if err := s.AddInputRequests(ctx, "auth:a", task.ID, map[string]InputRequest{
			"k1": {Method: "elicitation/create", Params: json.RawMessage(`{"secret":"PARAMS"}`)}}, "asking", ""); err != nil {
			t.Fatal(err)
		}
		step()
		if _, err := s.AnswerInputs(ctx, "auth:a", task.ID, map[string]json.RawMessage{"k1": json.RawMessage(`{"secret":"ANSWER"}`)}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 5; i++ {
			step()
			if err := s.SetProgress(ctx, "auth:a", task.ID, json.RawMessage(fmt.Sprintf(`{"progress":%d}`, i)), ""); err != nil {
				t.Fatal(err)
			}
		}
		step()
		if _, err := s.OpsCancel(ctx, "auth:a", task.ID, "stop it"); err != nil {
			t.Fatal(err)
		}
		tl, attempts, err := s.OpsTimeline(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, te := range tl {
			got = append(got, te.Kind+"/"+te.Word+"/"+te.Text)
		}
		want := []string{"created/working/", "input/elicitation/create/k1", "status/input_required/asking",
			"answered//k1", "status/working/", `progress//{"progress":5}`, "cancel/operator/stop it"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("timeline:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for i := 1; i < len(tl); i++ {
			if tl[i].At.Before(tl[i-1].At) {
				t.Errorf("entry %d is older than the one before", i)
			}
		}
		if attempts != 1 {
			t.Errorf("attempts = %d, want 1 without the field", attempts)
		}
		for _, te := range tl {
			if strings.Contains(te.Text, "PARAMS") || strings.Contains(te.Text, "ANSWER") {
				t.Errorf("the timeline holds a request's params or an answer: %+v", te)
			}
		}
		// A client's cancel says so.
		b, _ := s.Create(ctx, NewTask{Owner: "auth:a", Tool: "t", Protocol: Protocol2026, TTL: time.Minute})
		if _, err := s.RequestCancel(ctx, "auth:a", b.ID, "bye"); err != nil {
			t.Fatal(err)
		}
		if tl, _, _ := s.OpsTimeline(ctx, b); len(tl) != 2 || tl[1].Kind != "cancel" || tl[1].Word != "client" {
			t.Errorf("client cancel: %+v", tl)
		}
		// The list expires with the task.
		if ttl := e.rdb.PTTL(ctx, s.k.timeline("auth:a", task.ID)).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("timeline ttl %v, want the task's", ttl)
		}
	})
}

// TestTimelineBounded: a task with many changes keeps the newest 100
// entries, each text cut to 300 bytes.
func TestTimelineBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.store(t)
		task, _ := s.Create(ctx, NewTask{Owner: "auth:a", Tool: "t", Protocol: Protocol2026, TTL: time.Minute})
		long := strings.Repeat("x", 5000)
		for i := 0; i < 150; i++ {
			reqs := map[string]InputRequest{fmt.Sprintf("k%d", i): {Method: "sampling/createMessage"}}
			if err := s.AddInputRequests(ctx, "auth:a", task.ID, reqs, long, ""); err != nil {
				t.Fatal(err)
			}
		}
		n := e.rdb.LLen(ctx, s.k.timeline("auth:a", task.ID)).Val()
		if n != 100 {
			t.Errorf("timeline holds %d entries, want 100", n)
		}
		tl, _, _ := s.OpsTimeline(ctx, task)
		if len(tl) == 0 || tl[len(tl)-1].Text != "k149" {
			t.Errorf("newest entry %+v, want k149", tl[len(tl)-1])
		}
		for _, te := range tl {
			if len(te.Text) > 300 {
				t.Fatalf("entry text of %d bytes", len(te.Text))
			}
		}
	})
}

// TestOpsRecordsOff: with NoOpsRecords the scripts write neither the
// index nor timelines, and still work.
func TestOpsRecordsOff(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.store(t, func(o *Options) { o.NoOpsRecords = true })
		task, err := s.Create(ctx, NewTask{Owner: "auth:a", Tool: "t", Protocol: Protocol2026, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.AddInputRequests(ctx, "auth:a", task.ID, map[string]InputRequest{"k": {Method: "m"}}, "", ""); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, "auth:a", task.ID, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		if !s.OpsEnabled() || s.RecordsEnabled() {
			t.Error("records reported on")
		}
		for _, k := range append(s.k.ops(), s.k.timeline("auth:a", task.ID)) {
			if e.exists(k) {
				t.Errorf("%s written with the records off", k)
			}
		}
	})
}

// TestOpsExpired: a task whose ttl elapsed while it ran is remembered,
// with its tool, when the next create drops it from the index; one that
// ended is not.
func TestOpsExpired(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.store(t)
		lost, _ := s.Create(ctx, NewTask{Owner: "auth:a", Tool: "lost<tool>", Protocol: Protocol2026, TTL: 50 * time.Millisecond})
		done, _ := s.Create(ctx, NewTask{Owner: "auth:a", Tool: "done", Protocol: Protocol2026, TTL: 50 * time.Millisecond})
		if err := s.Complete(ctx, "auth:a", done.ID, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		e.elapse(100 * time.Millisecond)
		if _, err := s.Create(ctx, NewTask{Owner: "auth:b", Tool: "x", Protocol: Protocol2026, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		got, err := s.OpsExpired(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != lost.ID || got[0].Tool != "lost<tool>" || got[0].ExpiredAt.IsZero() {
			t.Errorf("OpsExpired = %+v, want the lost task only", got)
		}
	})
}

// TestReplicasHeartbeat: records published are read back within the
// window, bounded by their expiry and the window.
func TestReplicasHeartbeat(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.store(t)
		at := time.UnixMilli(1_700_000_000_000)
		for _, id := range []string{"r2", "r1"} {
			if err := s.PublishReplica(ctx, ReplicaStatus{ID: id, Version: "v1", Held: 3, MaxInflight: 10, LastSweep: at}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PublishReplica(ctx, ReplicaStatus{ID: "bad\nid"}, time.Minute); err == nil {
			t.Error("a replica id with a newline was published")
		}
		got, err := s.Replicas(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != "r1" || got[1].Held != 3 || got[1].MaxInflight != 10 || !got[0].LastSweep.Equal(at) {
			t.Errorf("Replicas = %+v", got)
		}
		e.clock.Advance(2 * time.Minute) // the store's clock: no need to wait for key expiry
		if got, _ := s.Replicas(ctx, time.Minute); len(got) != 0 {
			t.Errorf("replicas not seen for 2 minutes still listed: %+v", got)
		}
	})
}
