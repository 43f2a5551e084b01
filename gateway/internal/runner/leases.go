package runner

// Lease renewal, batched per replica: every LeaseRenew one pipelined round
// trip (per Redis node) extends the leases of all the tasks whose workers
// run here (taskstore.ExtendMany), not one script call per task. Each
// worker gets its task's outcome on its renewal channel and acts on it as
// before (renewed): a lost lease aborts the call, a terminal task is a
// cancel whose event was lost, a vanished record ends the worker. The
// recovery guarantees are unchanged: a lease still lasts --lease from its
// last renewal, renewals still come every --lease-renew.

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/taskstore"
)

// leaseSet is the workers whose leases the runner renews, and their
// renewal: it needs only the store's ExtendMany, the replica's name and
// the lease's length and period (Params).
type leaseSet struct {
	Mu   sync.Mutex
	runs map[*taskRun]struct{}

	store interface {
		ExtendMany(ctx context.Context, refs []taskstore.LeaseRef, holder string, d time.Duration) []error
	}
	replica string
	lease   time.Duration // how long a lease lasts unrenewed
	every   time.Duration // how often they are renewed
}

func (l *leaseSet) add(run *taskRun) {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	if l.runs == nil {
		l.runs = map[*taskRun]struct{}{}
	}
	l.runs[run] = struct{}{}
}

func (l *leaseSet) remove(run *taskRun) {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	delete(l.runs, run)
}

func (l *leaseSet) snapshot() []*taskRun {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	out := make([]*taskRun, 0, len(l.runs))
	for run := range l.runs {
		out = append(out, run)
	}
	return out
}

// renew renews every held lease each period until ctx (the runner's
// life) ends.
func (l *leaseSet) renew(ctx context.Context) {
	t := time.NewTicker(max(l.every, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.renewOnce(ctx)
		}
	}
}

// renewOnce extends the leases of every worker's task in one pipeline and
// hands each worker its outcome; a worker that has not taken the previous
// one yet keeps that (it acts on one at a time).
func (l *leaseSet) renewOnce(life context.Context) {
	runs := l.snapshot()
	if len(runs) == 0 {
		return
	}
	refs := make([]taskstore.LeaseRef, len(runs))
	for i, run := range runs {
		refs[i] = taskstore.LeaseRef{Owner: run.j.Owner, ID: run.j.Task.ID}
	}
	// Bounded by a period: the next renewal follows anyway. No span: a
	// renewal is no part of any request's or task's story.
	ctx, cancel := context.WithTimeout(trace.ContextWithSpanContext(life, trace.SpanContext{}), l.every)
	defer cancel()
	errs := l.store.ExtendMany(ctx, refs, l.replica, l.lease)
	for i, run := range runs {
		if errs[i] == nil {
			continue // renewed: nothing for the worker to do
		}
		select {
		case run.renewal <- errs[i]:
			run.wake()
		default:
		}
	}
}
