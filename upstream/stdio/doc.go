// Package stdio fronts an MCP server that runs as a child process over
// stdio (MCP 2025-11-25, Transports, "stdio") as if it were a session
// server over Streamable HTTP, so that the rest of taskgate (the upstream
// client, both fronts, the runner) works unchanged. The Bridge is an
// http.Handler; Transport hands it the upstream client's requests in
// process, with no socket.
//
// Each client session gets a child of its own, initialized with the
// client's own initialize: a stdio server assumes one client per process
// (its roots, its state, its log level). With Shared, one child serves
// every session instead, for servers that keep nothing per client:
//
//	client request        its id rewritten to a bridge id, and its
//	                      _meta.progressToken to a bridge token, so that
//	                      requests never collide on a shared child; the
//	                      answer comes back on the request's SSE stream with
//	                      the client's id, written as it is read
//	child request         (elicitation, sampling, roots) sent on the stream
//	                      of the session's one call in flight when it is a
//	                      tools/call, resources/read or prompts/get
//	                      (mcpwire.CarriesUnrelated), else on the session's
//	                      GET stream (held until the client opens one, for
//	                      HoldAsk), under a bridge id only that session
//	                      may answer; the answer goes back with the child's
//	                      id (route.go)
//	child notification    progress to the call whose token it names;
//	                      anything else to the session's GET streams
//	cancel, DELETE,       notifications/cancelled to the child
//	client gone
//
// A child that exits fails its calls in flight with a JSON-RPC error
// naming its exit status; a shared child is restarted with backoff, a
// session's own child ends its session (the client initializes again),
// unless a call the gateway runs again was in flight on it: then the
// session gets a fresh child (respawn.go); so do all the sessions on a
// principal's child (principal.go) when any of them had such a call.
//
// A session's GET streams, the child's requests held for one, the GET
// handler and the idle-session reaper are upstream/internal/bridgesession,
// which upstream/sse shares; the bridge's mutex guards them.
//
// The files:
//
//   - bridge.go: Options, the Bridge, Start, Ready and Close.
//   - serve.go: the client-facing side (ServeHTTP): initialize, a
//     session's requests, answers, notifications, GET and DELETE, and the
//     session limits.
//   - route.go: a child's messages routed to the sessions and calls they
//     belong to.
//   - lifecycle.go: what ends with a child (forget), a session or a call,
//     and idle reaping.
//   - fleet.go: the fleet, the bridge's children as processes: started
//     and initialized; it holds the warm pool, the principals' children,
//     the respawns and the usage watcher, each in its file:
//   - warm.go: children started ahead (--upstream-warm).
//   - principal.go: a child per principal (--upstream-scope principal).
//   - respawn.go: a fresh child for a session whose child died under a
//     call the gateway runs again, and the rerun mark on the hop.
//   - budget.go, budget_linux.go, budget_other.go: the per-child and
//     per-replica limits, and the usage read from /proc.
//   - restart.go: the restart-with-backoff loop of a child that serves
//     every client (the shared child, the 2026-07-28 child).
//   - process.go, procattr_linux.go, procattr_other.go: one child process
//     and its pipes.
//   - large.go: lines too large to hold, spilled to a file.
//   - replicas.go, hop.go: sessions (and principals' children, claimed
//     atomically) followed across replicas over a signed hop.
//   - stateless.go, stateless_serve.go, stateless_headers.go: a child that
//     speaks 2026-07-28, served statelessly (not with PerPrincipal, whose
//     bridge serves only sessions: one stateless child would serve every
//     principal).
//   - metrics.go: the bridge's Prometheus collectors.
//   - transport.go: the in-process transport for the upstream client.
//   - split.go: SplitCommand, a command line into its words.
package stdio
