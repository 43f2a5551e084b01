// Package upstreamside is everything that talks to the upstream on a
// client's behalf (Side): it knows the upstream.Client, and no front uses
// the client directly.
//
//   - forward.go: Side, and forwarding a client's message to a session or a
//     stateless upstream, with the answer relayed back.
//   - call.go: the fronts' own requests (Call, Post, Respond, CloseSession).
//   - era.go: the era probe with server/discover (which protocol the
//     upstream speaks); the versions the gateway fronts (PresentsTasks).
//   - owner.go: owner sessions, the upstream sessions held for 2026-07-28
//     clients of a session upstream (Target).
//   - relay.go: the streaming pass-through relay.
//   - answer.go: reading a whole answer to rewrite it (Answer).
//   - keepalive.go: keep-alives on a plain call's answer stream while the
//     upstream works.
//   - listen.go: subscriptions/listen in front of a session upstream, fed
//     by the owner session's GET stream (ListenFilter).
//   - catalog.go: listing the upstream's tools for a call of a tool the
//     catalogue has no declaration for (ToolDeclared).
//   - health.go: the upstream as last seen (Health, taskgate_upstream_up).
//
// It may import internal/decide, internal/obs, internal/core, upstream,
// taskstore and internal/mcpwire, and nothing else of the gateway: `go
// list -deps` of this package names no gateway package above it.
package upstreamside
