// Package front2026 is the 2026-07-28 front, Front: stateless requests
// (SEP-2575) on the same endpoint as the 2025-11-25 sessions, told apart
// per request (MCP 2026-07-28, Versioning: "A dual-era server selects its
// behavior from how the client opens"). With the tasks extension declared
// (SEP-2663) the gateway decides per call whether it becomes a task; a
// client's input goes through multi round-trip requests (SEP-2322), which
// the gateway bridges to a session upstream's server→client requests. How
// a request is told apart and routed is drawn at the top of serve.go.
//
//   - front2026.go: Front and New; Store, what it needs of the task store;
//     statelessReq, a validated request; forward, what the front does not
//     serve itself.
//   - serve.go: IsStateless, whether a POST is a 2026-07-28 request;
//     Serve, its validation (validate: headers against _meta and the
//     method) and routing.
//   - discover.go: server/discover, from a stateless upstream's answer or
//     a session upstream's initialize, with the tasks extension added.
//   - call.go: tools/call as sync, task or auto (the hybrid wait:
//     front.Deps.HoldHybrid), decideCall, startTask.
//   - tasks.go: tasks/get (front.Deps.GetTask), tasks/update,
//     tasks/cancel.
//   - listen.go: subscriptions/listen, the upstream's stream merged with
//     the gateway's notifications of the client's tasks.
//   - bridge.go: the MRTR bridge: a plain call whose session upstream asks
//     for input, held under a hidden task, its questions input_required
//     rounds (bridgePrefix).
//   - mrtr.go: MRTR rounds before the task: a signed requestState
//     (mrtrPrefix, maxMRTRRounds), the retry checked and its answers
//     handed to the held call, a round nobody retries abandoned
//     (Config.MRTRHold, DefaultMRTRHoldFactor).
//   - native.go: a stateless upstream's own tasks (the tasks extension
//     declared in its server/discover), passed through and recorded per
//     owner (internal/native).
//   - fallback.go: the fallback task tools (internal/fallback) for
//     clients without the tasks extension, and tools/list with them.
//
// It may import internal/front, internal/native, internal/fallback,
// internal/runner, internal/upstreamside, internal/decide, internal/obs,
// internal/core, policy, taskstore, upstream and internal/mcpwire, and
// nothing above it: not internal/front2025, not package gateway.
package front2026
