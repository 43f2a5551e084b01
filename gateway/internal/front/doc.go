// Package front is what the two fronts (internal/front2025,
// internal/front2026) share and neither owns: the components both hold,
// the hybrid hold of a call that may become a task, and the one tasks/get
// path of both protocols with its poll limit and render cache.
//
//   - deps.go: Deps, what both fronts hold (the runner, the upstream
//     side, the decider, Metrics, Log, Polls, Renders, Fallback, Trace:
//     the components themselves, not interfaces of them); GetTask, a poll
//     (tasks/get) of either protocol answered: the poll limit, then the
//     render cache or the store; HoldHybrid, a call held up to the hybrid
//     wait, which either answers in time or goes on to become a task;
//     WriteCallResult, a held call's end written as the answer to a
//     client of either era.
//   - ratelimit.go: PollLimiter (NewPollLimiter, Admit), the per-replica
//     token buckets of Config.PollLimit per owner and task, and the 429
//     answer of a poll past it.
//   - rendercache.go: RenderCache (NewRenderCache, Get, Removals), the
//     rendered tasks/get answers of terminal tasks per Flavour
//     (Render2025Get, Render2026Get), reused only while the record they
//     were rendered from is unchanged; RenderStore, what it reads of the
//     store.
//
// It may import internal/fallback, internal/runner, internal/upstreamside,
// internal/decide, internal/obs, internal/core, policy, taskstore and
// internal/mcpwire, and nothing above it: no front, not package gateway.
package front
