// Package runner holds the upstream calls of tasks (and the hybrid and
// bridged calls that may become tasks), each in a worker with a lease on
// its task. Its interfaces are the store (runnerStore, recovererStore,
// notifyStore) and the caller (upstreamCaller).
//
//   - runner.go: Runner, its lifetime context, drain and Launch, the one sequence that makes a job
//     a task (anonymous caps counted, the task stored, all of it undone on
//     error, the worker started only then: docs/ARCHITECTURE.md
//     invariant 1).
//   - admit.go: admission, the fair shares of --max-inflight (its counts
//     under the runner's mu): Admit(principal), Count, Slot
//     (freed exactly once), --max-inflight-per-principal, the fair-share
//     rule and the lightest-first wait when the pool is full, the
//     refusals with their retry hint (docs/operations.md, "Fair shares").
//   - rate.go: task creations a minute per principal (--max-task-rate).
//   - call.go: one in-flight upstream call; WaitPlain, a held call waited
//     for as a plain one.
//   - worker.go: Job and the worker of one task, which has no goroutine
//     while it only waits for the upstream's answer (wake, drain, idle),
//     and its lease renewal's outcome.
//   - leases.go: leaseSet, the batched renewal of every worker's lease.
//   - input.go: input requests (server→client requests, MRTR rounds) into
//     the store, and the client's answers back upstream.
//   - outcome.go: writing the outcome, with retries (invariant 5).
//   - notify.go: the notifications of a 2025-11-25 task's status,
//     progress and log messages to its session (StatusChanged); a task of
//     another protocol has nobody to tell, and costs no store read.
//   - native.go, native2026.go: a held call that goes through the
//     upstream's own task (upstreamTasks, which needs only the upstream
//     client and the log; callUpstream picks the way).
//   - status.go: Figures, what the runner holds now, for the operator's
//     console.
//   - recoverer.go: the recoverer, which fails a dead replica's tasks once
//     their lease expired (invariant 4).
//   - rerun.go: durable tasks (docs/durable.md): a rerunnable task's call
//     recorded, run again by the recoverer or its worker, answers
//     replayed, upstream tasks re-attached (internal/durable's logic).
//
// It may import internal/durable, internal/upstreamside, internal/obs, internal/core,
// taskstore, upstream and internal/mcpwire, and nothing else of the
// gateway: `go list -deps` of this package names no gateway package above
// it.
package runner
