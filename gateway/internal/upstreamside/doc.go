// Package upstreamside is everything that talks to the upstream on a
// client's behalf (Side): no front uses the upstream.Client directly. (The
// runner holds the client for its tasks' calls, and package gateway for
// health checks and the OAuth discovery pass-through.)
//
//   - forward.go: Side, and forwarding a client's message to a session or a
//     stateless upstream, with the answer relayed back.
//   - call.go: the fronts' own requests (Call, Post, Respond, CloseSession).
//   - era.go: the era probe with server/discover (which protocol the
//     upstream speaks); the versions the gateway fronts (PresentsTasks).
//     The _meta keys it sends are core's (core.Meta*).
//   - owner.go: owner sessions, the upstream sessions held for 2026-07-28
//     clients of a session upstream (Target).
//   - relay.go: the streaming pass-through relay.
//   - answer.go: reading a whole answer to rewrite it (Answer).
//   - keepalive.go: keep-alives on a plain call's answer stream while the
//     upstream works.
//   - listen.go: subscriptions/listen in front of a session upstream, fed
//     by the owner session's GET stream (ListenFilter).
//   - catalog.go: listing the upstream's tools into the decider's
//     catalogue for a call of a tool it has no declaration for
//     (ToolDeclared).
//   - health.go: the upstream as last seen (Health, taskgate_upstream_up).
//
// It may import internal/decide, internal/obs, internal/core, upstream,
// taskstore and internal/mcpwire, and nothing else of the gateway: `go
// list -deps` of this package names no gateway package above it.
package upstreamside
