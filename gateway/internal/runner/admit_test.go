package runner

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// admitRunner is a runner with only its admission: no store, no workers.
func admitRunner(maxInflight, perPrincipal int, wait time.Duration) *Runner {
	rn := &Runner{Params: Params{MaxInflight: maxInflight, MaxPerPrincipal: perPrincipal}, changed: make(chan struct{})}
	rn.adm = rn.newAdmission(newTaskRates(0))
	rn.adm.fairWaitFor = wait
	return rn
}

func mustAdmit(t *testing.T, rn *Runner, p string) *Slot {
	t.Helper()
	s, e := rn.Admit(context.Background(), p, AdmitCall)
	if e != nil {
		t.Fatalf("admit %s: %v", p, e)
	}
	return s
}

// refusal checks e refuses for reason, naming flag, with a retry hint.
func refusal(t *testing.T, e *mcpwire.Error, reason, flag string) {
	t.Helper()
	var d struct {
		RetryAfterMs int64  `json:"retryAfterMs"`
		Reason       string `json:"reason"`
	}
	if e == nil {
		t.Fatalf("admitted, want refused for %s", reason)
	}
	if err := json.Unmarshal(e.Data, &d); err != nil || d.Reason != reason || d.RetryAfterMs <= 0 || !strings.Contains(e.Message, flag) {
		t.Fatalf("refusal %q data %s: want reason %s, retryAfterMs, and %s named", e.Message, e.Data, reason, flag)
	}
}

// state is the admission's counts: calls in flight, per principal, waiting.
func (rn *Runner) state() (int, map[string]int, int) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	held := map[string]int{}
	for k, v := range rn.adm.held {
		held[k] = v
	}
	return rn.adm.calls, held, len(rn.adm.waiters)
}

// TestAdmitPerPrincipalCap: a principal past --max-inflight-per-principal
// is refused at once, reserving nothing; another is not affected.
func TestAdmitPerPrincipalCap(t *testing.T) {
	rn := admitRunner(4, 2, time.Minute)
	a1, a2 := mustAdmit(t, rn, "a"), mustAdmit(t, rn, "a")
	_, e := rn.Admit(context.Background(), "a", AdmitCall)
	refusal(t, e, obs.RefusedPerPrincipal, "--max-inflight-per-principal")
	if calls, held, _ := rn.state(); calls != 2 || held["a"] != 2 {
		t.Fatalf("after the refusal: %d calls, a holds %d; want 2, 2", calls, held["a"])
	}
	mustAdmit(t, rn, "b")
	mustAdmit(t, rn, "b")
	a1.free()
	a1.free() // once only
	a2.free()
	if calls, held, _ := rn.state(); calls != 2 || held["a"] != 0 || len(held) != 1 {
		t.Fatalf("after a's frees: %d calls, held %v; want 2 and only b's", calls, held)
	}
}

// TestAdmitFairShareLightestFirst: with the pool full, a principal holding
// at least its share is refused at once; those below it wait, and each
// freed slot goes to the waiting principal holding the fewest calls, not
// to the first that came.
func TestAdmitFairShareLightestFirst(t *testing.T) {
	rn := admitRunner(8, 0, time.Minute)
	var aSlots []*Slot
	for range 6 {
		aSlots = append(aSlots, mustAdmit(t, rn, "a"))
	}
	mustAdmit(t, rn, "c")
	mustAdmit(t, rn, "c")
	_, e := rn.Admit(context.Background(), "a", AdmitCall) // 6 ≥ 8/2
	refusal(t, e, obs.RefusedFairShare, "--max-inflight")
	type got struct {
		who  string
		slot *Slot
		e    *mcpwire.Error
	}
	done := make(chan got, 2)
	admit := func(p string) {
		s, e := rn.Admit(context.Background(), p, AdmitCall)
		done <- got{p, s, e}
	}
	go admit("c") // 2 < 8/2: waits
	waitWaiters(t, rn, 1)
	go admit("b") // 0 < 8/3: waits, after c
	waitWaiters(t, rn, 2)
	aSlots[0].free()
	first := <-done
	if first.who != "b" || first.e != nil {
		t.Fatalf("the freed slot went to %s (%v), want b, the lighter", first.who, first.e)
	}
	aSlots[1].free()
	if second := <-done; second.who != "c" || second.e != nil {
		t.Fatalf("the next freed slot went to %s (%v), want c", second.who, second.e)
	}
	if calls, held, waiting := rn.state(); calls != 8 || held["a"] != 4 || held["b"] != 1 || held["c"] != 3 || waiting != 0 {
		t.Fatalf("after: %d calls, held %v, %d waiting", calls, held, waiting)
	}
}

func waitWaiters(t *testing.T, rn *Runner, n int) {
	t.Helper()
	for {
		if _, _, w := rn.state(); w == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAdmitWaitEndsReservingNothing: a wait that times out, or whose
// client leaves, is refused and leaves no slot and no waiter behind.
func TestAdmitWaitEndsReservingNothing(t *testing.T) {
	rn := admitRunner(2, 0, time.Millisecond)
	mustAdmit(t, rn, "a")
	mustAdmit(t, rn, "c")
	_, e := rn.Admit(context.Background(), "b", AdmitCall)
	refusal(t, e, obs.RefusedMaxInflight, "--max-inflight")
	rn.adm.fairWaitFor = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, e = rn.Admit(ctx, "b", AdmitCall)
	refusal(t, e, obs.RefusedMaxInflight, "--max-inflight")
	if calls, held, waiting := rn.state(); calls != 2 || held["b"] != 0 || waiting != 0 {
		t.Fatalf("after the refusals: %d calls, held %v, %d waiting; want 2, none of b's, 0", calls, held, waiting)
	}
}

// TestAdmitTaskRate: task creations past --max-task-rate are refused with
// the time until the principal's next token; plain calls and other
// principals are not counted; a refusal for another limit takes no token.
func TestAdmitTaskRate(t *testing.T) {
	rn := admitRunner(0, 0, time.Minute)
	now := time.Unix(1000, 0)
	rn.adm.rates = newTaskRates(2)
	rn.adm.rates.now = func() time.Time { return now }
	for range 2 {
		if _, e := rn.Admit(context.Background(), "a", AdmitTask); e != nil {
			t.Fatal(e)
		}
	}
	_, e := rn.Admit(context.Background(), "a", AdmitTask)
	refusal(t, e, obs.RefusedTaskRate, "--max-task-rate")
	if !strings.Contains(string(e.Data), `"retryAfterMs":30000`) {
		t.Errorf("retry hint %s, want 30000 ms (a token every 30 s)", e.Data)
	}
	if _, e := rn.Admit(context.Background(), "a", AdmitCall); e != nil {
		t.Fatalf("a plain call counted against the task rate: %v", e)
	}
	if _, e := rn.Admit(context.Background(), "b", AdmitTask); e != nil {
		t.Fatalf("b's task refused for a's rate: %v", e)
	}
	now = now.Add(30 * time.Second)
	rn.adm.maxInflight, rn.adm.maxPerPrincipal = 5, 1 // a holds 3: refused by its cap
	_, e = rn.Admit(context.Background(), "a", AdmitTask)
	refusal(t, e, obs.RefusedPerPrincipal, "--max-inflight-per-principal")
	rn.adm.maxInflight, rn.adm.maxPerPrincipal = 0, 0
	if _, e := rn.Admit(context.Background(), "a", AdmitTask); e != nil {
		t.Fatalf("the token the refusal took was not given back: %v", e)
	}
}

// TestTaskRatesBounded: the buckets of many principals stay bounded.
func TestTaskRatesBounded(t *testing.T) {
	tr := newTaskRates(60)
	now := time.Unix(0, 0)
	tr.now = func() time.Time { return now }
	for i := range maxRateBuckets + 10 {
		tr.take(string(rune(i)) + "p")
		now = now.Add(time.Millisecond)
	}
	if len(tr.buckets) > maxRateBuckets {
		t.Fatalf("%d buckets, want at most %d", len(tr.buckets), maxRateBuckets)
	}
}
