package runner

// Admission: whether a new in-flight call may start on this replica, and
// for whom it counts. --max-inflight bounds the calls of every principal
// together; without more, one principal starting long calls as fast as it
// can fills the pool and every other principal is refused (issue 36: 120 of
// 120 of another user's creations refused). So each call counts for its
// principal (core.Principal: the validated principal or the Authorization
// digest, else the client address), and:
//
//   - a principal holds at most MaxPerPrincipal calls (--max-inflight-per-
//     principal; by default half the pool, so one principal alone never
//     takes it all): past it, refused at once;
//   - when the pool is full, a principal holding at least its share
//     (MaxInflight / principals holding calls) is refused at once; one
//     holding less waits up to fairWait (1 s), and each freed slot goes to the
//     waiting principal holding the fewest calls (first come first among
//     equals), never to a heavier one;
//   - a task creation (AdmitTask) takes a token from the principal's
//     bucket of TaskRate a minute first (rate.go).
//
// A refusal reserves nothing (the rate token it took is given back), says
// which limit and which flag, carries data.retryAfterMs (as the poll
// limit's does: internal/front/ratelimit.go), and is counted and logged
// sampled (obs.Refusals). MCP 2025-11-25, Tasks, "Security
// Considerations": receivers SHOULD enforce limits on concurrent tasks per
// requestor and rate-limit task operations.

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// admission is the runner's fair shares of --max-inflight: the calls held
// per principal, the admissions waiting for a slot, and the task rates.
// Its counts are guarded by the runner's mu, which also guards the workers
// Idle waits for; changedLocked wakes Idle when a slot is freed.
type admission struct {
	mu            *sync.Mutex // the runner's mu
	changedLocked func()      // the runner's, under mu
	draining      *atomic.Bool
	metrics       *obs.Metrics
	// maxInflight bounds the calls of every principal together, and
	// maxPerPrincipal those of one (Params); 0: no limit.
	maxInflight, maxPerPrincipal int
	// fairWaitFor bounds an admission's wait for a slot of a full pool;
	// 0: fairWait. The package's tests shorten it.
	fairWaitFor time.Duration

	calls   int            // in-flight calls, plus slots reserved for calls about to start
	held    map[string]int // calls (as counted in calls) per principal; only principals holding some
	waiters []*waiter      // admissions waiting for a slot of a full pool
	rates   *taskRates     // task creations per principal (rate.go)
}

// Admit reserves a slot for a new in-flight call of principal (a task, a
// hybrid or bridged call), or says why not (admission.admit).
func (rn *Runner) Admit(ctx context.Context, principal string, kind AdmitKind) (*Slot, *mcpwire.Error) {
	return rn.adm.admit(ctx, principal, kind)
}

// Count takes a slot for principal without the limits (admission.count).
func (rn *Runner) Count(principal string) *Slot { return rn.adm.count(principal) }

// AdmitKind is what an admitted call is for.
// Exported because Admit's signature names it (the fronts pass AdmitCall or AdmitTask).
type AdmitKind uint8

const (
	// AdmitCall: a plain, hybrid or bridged call (it may become a task,
	// but its client did not ask for one).
	AdmitCall AdmitKind = iota
	// AdmitTask: a call its client asked for as a task, which also counts
	// against the task creations per minute (TaskRate).
	AdmitTask
)

// fairWait is how long an admission below its fair share waits for
// a slot of a full pool before it is refused.
const fairWait = time.Second

// retryHint is the retryAfterMs of a refusal that waits for a slot to
// free: when one frees is not known, about when one usually has.
const retryHint = time.Second

// Slot is one in-flight call's place under --max-inflight, counted for a
// principal. Free gives it back; it may be called on every path, only the
// first call counts.
// Exported because Admit, Hold, StartCall and Job.Slot name it (the fronts carry it).
type Slot struct {
	a         *admission
	principal string
	freed     atomic.Bool
}

// free gives the slot back (once; a nil slot is none).
func (s *Slot) free() {
	if s == nil || s.freed.Swap(true) {
		return
	}
	s.a.freeSlot(s.principal)
}

// waiter is an admission waiting for a slot of a full pool.
type waiter struct {
	principal string
	granted   chan struct{} // closed once slot is set (under the runner's mu)
	slot      *Slot
}

// admit (Runner.Admit) reserves a slot for a new in-flight call of principal (a task, a
// hybrid or bridged call), or says why not. The caller hands the slot to
// a job (Job.Slot) or to Hold, or frees it. ctx bounds the fair wait.
func (a *admission) admit(ctx context.Context, principal string, kind AdmitKind) (*Slot, *mcpwire.Error) {
	if a.draining.Load() {
		return nil, errDraining
	}
	if kind == AdmitTask {
		if ok, wait := a.rates.take(principal); !ok {
			return nil, a.refuse(obs.RefusedTaskRate, wait, fmt.Sprintf("too many tasks created by this principal on this replica "+
				"(limit %g a minute, --max-task-rate)", a.rates.perMinute))
		}
	}
	slot, e := a.admitSlot(ctx, principal)
	if e == nil && a.draining.Load() { // drain began meanwhile
		slot.free()
		slot, e = nil, errDraining
	}
	if e != nil && kind == AdmitTask {
		a.rates.refund(principal) // a refusal takes nothing
	}
	return slot, e
}

// admitSlot takes a slot for principal now, or after a fair wait.
func (a *admission) admitSlot(ctx context.Context, principal string) (*Slot, *mcpwire.Error) {
	slot, w, reason := a.reserve(principal)
	if w != nil {
		slot, reason = a.await(ctx, w)
	}
	switch reason {
	case "":
		return slot, nil
	case obs.RefusedPerPrincipal:
		return nil, a.refuse(reason, retryHint, fmt.Sprintf("too many upstream calls in flight for this principal on this replica "+
			"(limit %d, --max-inflight-per-principal)", a.maxPerPrincipal))
	case obs.RefusedFairShare:
		return nil, a.refuse(reason, retryHint, fmt.Sprintf("too many upstream calls in flight on this replica (limit %d, --max-inflight), "+
			"and this principal holds at least its fair share of them", a.maxInflight))
	}
	return nil, a.refuse(reason, retryHint, fmt.Sprintf("too many upstream calls in flight on this replica (limit %d, --max-inflight)", a.maxInflight))
}

// refuse is the error of a refusal for reason, with its retry hint; it is
// counted and logged (sampled).
func (a *admission) refuse(reason string, after time.Duration, msg string) *mcpwire.Error {
	a.metrics.Refused(reason, msg+": tools/call refused")
	e := mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, msg+"; retry later")
	e.Data = mcpwire.MustMarshal(map[string]any{"retryAfterMs": max(after.Milliseconds(), 1), "reason": reason})
	return e
}

// reserve takes a slot for principal under the rules above: a slot, a
// waiter to await, or the reason of a refusal.
func (a *admission) reserve(principal string) (*Slot, *waiter, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	held := a.held[principal]
	if a.capped() && held >= a.maxPerPrincipal {
		return nil, nil, obs.RefusedPerPrincipal
	}
	if a.maxInflight <= 0 || a.calls < a.maxInflight {
		return a.takeLocked(principal), nil, ""
	}
	holders := len(a.held)
	if held == 0 {
		holders++ // its share counts itself
	}
	if held >= max(a.maxInflight/holders, 1) {
		return nil, nil, obs.RefusedFairShare
	}
	if len(a.waiters) >= a.maxInflight { // bounded: a flood is refused, not queued
		return nil, nil, obs.RefusedMaxInflight
	}
	w := &waiter{principal: principal, granted: make(chan struct{})}
	a.waiters = append(a.waiters, w)
	return nil, w, ""
}

// await waits for w's slot up to the fair wait, or until ctx ends.
func (a *admission) await(ctx context.Context, w *waiter) (*Slot, string) {
	t := time.NewTimer(cmp.Or(a.fairWaitFor, fairWait))
	defer t.Stop()
	select {
	case <-w.granted:
		return w.slot, ""
	case <-t.C:
	case <-ctx.Done():
	}
	a.mu.Lock()
	a.waiters = slices.DeleteFunc(a.waiters, func(x *waiter) bool { return x == w })
	slot := w.slot // granted meanwhile: given back, the refusal holds nothing
	a.mu.Unlock()
	slot.free()
	return nil, obs.RefusedMaxInflight
}

// count (Runner.Count) takes a slot for principal without the limits: a running task's
// next call (an MRTR round, a retry on a reopened session, a rerun) is not
// refused midway.
func (a *admission) count(principal string) *Slot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.takeLocked(principal)
}

func (a *admission) takeLocked(principal string) *Slot {
	a.calls++
	a.held[principal]++
	return &Slot{a: a, principal: principal}
}

// freeSlot gives back principal's slot, and hands freed ones to waiters:
// the lightest principal first, so a freed slot never goes to a heavier
// one while a lighter one waits.
func (a *admission) freeSlot(principal string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls--
	if a.held[principal]--; a.held[principal] <= 0 {
		delete(a.held, principal) // bounded: only principals holding calls
	}
	for a.calls < a.maxInflight {
		i := a.lightestLocked()
		if i < 0 {
			break
		}
		w := a.waiters[i]
		a.waiters = slices.Delete(a.waiters, i, i+1)
		w.slot = a.takeLocked(w.principal)
		close(w.granted)
	}
	a.changedLocked()
}

// lightestLocked is the index of the first waiter whose principal holds
// the fewest calls and is below its own cap; -1: none.
func (a *admission) lightestLocked() int {
	best, bestHeld := -1, 0
	for i, w := range a.waiters {
		h := a.held[w.principal]
		if a.capped() && h >= a.maxPerPrincipal {
			continue
		}
		if best < 0 || h < bestHeld {
			best, bestHeld = i, h
		}
	}
	return best
}

// capped reports whether MaxPerPrincipal caps anything: not when it is
// the whole pool or more (the pool's own rules then say why).
func (a *admission) capped() bool {
	return a.maxPerPrincipal > 0 && (a.maxInflight <= 0 || a.maxPerPrincipal < a.maxInflight)
}
