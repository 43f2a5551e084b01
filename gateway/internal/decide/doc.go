// Package decide is the policy decider: what the gateway does with a
// tools/call (pass it through, make it a task, or wait the hybrid wait
// first), from the rules in force, the tool's declaration and its learned
// latency.
//
//   - decide.go: Decider, which applies policy.Decide and writes the debug
//     audit line; Call, its one answer per tools/call (DecideCall,
//     DecideDeclared: the decision, whether to learn, the upstream's own
//     taskSupport, native or ruled, from one read of the catalogue and
//     the rules); TaskTTL, the ttl a decision gives a task.
//   - catalog.go: the tool catalogue (declared taskSupport, annotations,
//     outputSchema), shared through the store so a tools/list seen by any
//     replica teaches every replica; RewriteTools, the
//     execution.taskSupport rewrite of a tools/list; whether the upstream
//     declares tasks itself (UpstreamSupport, LearnServerCaps).
//   - latency.go: latency learning (Observe) and its periodic
//     publish-and-merge with the other replicas; FleetLatencies.
//
// It may import internal/core, taskstore and policy, and nothing else of
// the gateway: `go list -deps` of this package names no other gateway
// package. The upstream side lists the upstream's tools for it
// (internal/upstreamside/catalog.go), not the other way round.
package decide
