// Package gateway is taskgate's http.Handler: the MCP Streamable HTTP
// endpoint that clients talk to, in front of one unmodified upstream MCP
// server, adding MCP Tasks to it. The architecture, the life of a task and
// the numbered invariants the code cites are in docs/ARCHITECTURE.md.
//
//	client ──HTTP──▶ Handler.ServeHTTP (handler.go)
//	                   ├─ /healthz, /readyz, /metrics
//	                   └─ Config.Path (default /mcp)
//	                        ├─ POST ─ read (max body) ─ mcpwire.Parse ─ route:
//	                        │     2026-07-28 request    → front2026 (front2026*.go)
//	                        │     2025-11-25 session    → front2025 (front2025*.go)
//	                        │     anything else         → upstreamside.Side.Forward
//	                        ├─ GET  (a session's SSE stream) → relay (+ task notifications)
//	                        └─ DELETE (end of session)       → relay
//
//	fronts ─▶ internal/runner (tasks' upstream calls, leases, recovery)
//	       ─▶ internal/upstreamside (era, owner sessions, forwarding)
//	       ─▶ internal/decide (policy, tool catalogue, learned latency)
//	       ─▶ internal/core (task shapes, owners, error mapping)
//	       ─▶ taskstore.Store (Redis), through narrow interfaces
//
// File prefixes say which side code serves: front2025 a 2025-11-25 (or
// older) client, front2026 a 2026-07-28 client, upstream the upstream
// server, runner the task runner.
//
// The relay is faithful: bytes the gateway does not handle reach the other
// side unchanged, including unknown fields and headers. A client that goes
// away cancels the upstream HTTP request (the request context), which is
// all a transparent proxy may do: MCP says a dropped connection is not a
// cancellation (MCP 2026-07-28, Streamable HTTP transport,
// "Cancellation"), so no notifications/cancelled is invented on the
// client's behalf.
//
// Errors become JSON-RPC errors in one function, core.RPCError
// (internal/core/errors.go), with the codes and HTTP statuses of
// internal/mcpwire, and are logged once, where the request ends.
//
// # Components and their files
//
// Each component is a type built in New with the dependencies it needs
// passed in; what it needs of the store it states as a small interface in
// its own file, so a test can build one component alone.
//
//   - Handler (handler.go) routes each request to a component and owns
//     nothing else: New, Close, Drain, ServeHTTP. It reads and checks a
//     POST body, tells a 2026-07-28 request from a session one, and hands
//     what no component claims to the upstream side's relay.
//   - The runner, internal/runner (Runner: admission, Launch, workers,
//     leases, the recoverer).
//   - The 2025-11-25 front, type front2025. front2025.go: initialize and
//     routing. front2025_sessions.go: the session cache.
//     front2025_toolslist.go: the execution.taskSupport rewrite.
//     front2025_call.go: tools/call. front2025_native.go: the upstream's
//     own task tools, passed through and recorded per owner.
//     front2025_tasks.go: tasks/get, tasks/list, tasks/cancel.
//     front2025_result.go: the blocking tasks/result stream.
//     front2025_input.go: the client's answers to input requests.
//     front2025_stateless.go, front2025_stateless_stream.go: the gateway
//     as the session of a 2025-11-25 client in front of a stateless
//     upstream (its calls, its GET stream). front2025_notify.go: status
//     and progress notifications on the session's GET stream.
//   - The 2026-07-28 front, type front2026. front2026.go: validation of a
//     stateless request and routing. front2026_discover.go:
//     server/discover. front2026_call.go: tools/call as sync, task or
//     auto (hybrid wait). front2026_tasks.go: tasks/get, tasks/update,
//     tasks/cancel. front2026_listen.go: subscriptions/listen.
//     front2026_bridge.go: the MRTR bridge. front2026_mrtr.go: MRTR rounds
//     before the task. front2026_native.go: a stateless upstream's own
//     tasks.
//   - What both fronts share: front.go (frontDeps and the one tasks/get
//     path of both protocols), native.go (the upstream's own tasks: the
//     store interface, how long a record is kept, a lost task marked and
//     shown failed).
//   - The upstream side, internal/upstreamside (Side: era probe, owner
//     sessions, forwarding, relay, keep-alive, the fronts' own requests;
//     neither a front nor the Handler uses the upstream.Client directly).
//   - The policy decider, internal/decide (Decider: policy, tool
//     catalogue, learned latency); the upstream side lists the upstream's
//     tools for it when a call names a tool the catalogue lacks.
//   - The fallback task tools, type fallback: fallback.go, with
//     front2025_fallback.go and front2026_fallback.go.
//   - Observation: internal/obs (metrics, tracing, the request families),
//     requests.go (every request's recorder; served counts, times and logs
//     it), health.go (/readyz).
//   - Identity: publicurl.go, oauthmeta.go, credentials.go, auth.go.
//   - The front door: frontdoor.go (Origin, CORS, forwarding headers),
//     rendercache.go (rendered tasks/get answers of terminal tasks),
//     ratelimit.go (the poll limit), config.go.
//
// Below this package, each importing only those under it: internal/runner
// → internal/upstreamside (the upstream side) → internal/decide (the policy
// decider) → internal/obs (metrics, tracing) → internal/core (what every
// component shares). None imports this package. Package gateway itself may
// import those, taskstore, upstream, policy, auth and internal/mcpwire.
package gateway
