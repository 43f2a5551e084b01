// Package gateway is taskgate's http.Handler: the MCP Streamable HTTP
// endpoint that clients talk to, in front of one unmodified upstream MCP
// server, adding MCP Tasks to it. The architecture, the life of a task and
// the numbered invariants the code cites are in docs/ARCHITECTURE.md.
//
//	client ──HTTP──▶ Handler.ServeHTTP (handler.go)
//	                   ├─ /healthz, /readyz, /metrics
//	                   └─ Config.Path (default /mcp)
//	                        ├─ POST ─ read (max body) ─ mcpwire.Parse ─ route:
//	                        │     2026-07-28 request    → internal/front2026 (Front.Serve)
//	                        │     2025-11-25 session    → internal/front2025 (Front.Serve)
//	                        │     anything else         → upstreamside.Side.Forward
//	                        ├─ GET  (a session's SSE stream) → relay (+ task notifications)
//	                        └─ DELETE (end of session)       → relay
//
//	internal/front2025, internal/front2026 (the fronts; neither imports the other)
//	   ─▶ internal/front (front.Deps, the tasks/get path, poll limit, render cache)
//	   ─▶ internal/native (the upstream's own tasks), internal/fallback (fallback task tools)
//	   ─▶ internal/runner (tasks' upstream calls, leases, recovery)
//	   ─▶ internal/upstreamside (era, owner sessions, forwarding)
//	   ─▶ internal/decide (policy, tool catalogue, learned latency)
//	   ─▶ internal/core (task shapes, owners, error mapping)
//	   ─▶ taskstore.Store (Redis), through narrow interfaces
//
//	internal/identity (before and beside the routing: the public URL, the
//	   auth guard, the principals' tokens, sessions bound to their
//	   principals; OAuth discovery on every other path)
//	   ─▶ internal/upstreamside, internal/obs, internal/core
//
// The package says which side code serves: internal/front2025 a
// 2025-11-25 (or older) client, internal/front2026 a 2026-07-28 client,
// internal/upstreamside the upstream server, internal/runner the task
// runner; internal/front, internal/native and internal/fallback are what
// both fronts share.
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
// # Components and their packages
//
// Each component is a type built in New with the dependencies it needs
// passed in; what it needs of the store it states as a small interface in
// its own package, so a test can build one component alone. Each package's
// doc.go indexes its files.
//
//   - Handler (handler.go) routes each request to a component and owns
//     nothing else: New, Close, Drain, ServeHTTP. It reads and checks a
//     POST body, tells a 2026-07-28 request from a session one
//     (front2026.IsStateless), and hands what no component claims to the
//     upstream side's relay. Its fronts are the fields f2025 and f2026.
//   - The 2025-11-25 front, internal/front2025 (front2025.Front:
//     initialize, sessions, the execution.taskSupport rewrite, tools/call,
//     tasks/*, the tasks/result stream, input answers, notifications, the
//     upstream's own tasks, the gateway as the session in front of a
//     stateless upstream).
//   - The 2026-07-28 front, internal/front2026 (front2026.Front:
//     validation and routing, server/discover, tools/call as sync, task
//     or auto, tasks/*, subscriptions/listen, the MRTR bridge and MRTR
//     rounds before the task, a stateless upstream's own tasks).
//   - What both fronts share: internal/front (front.Deps and the one
//     tasks/get path of both protocols, the hybrid hold, the poll limit
//     PollLimiter, the render cache of terminal tasks' tasks/get answers
//     RenderCache), internal/native (the upstream's own tasks: the store
//     interface, how long a record is kept, a lost task marked and shown
//     failed).
//   - The fallback task tools, internal/fallback (fallback.Tools; its
//     Config is this package's FallbackTools), with each front's
//     fallback.go.
//   - The runner, internal/runner (Runner: admission, Launch, workers,
//     leases, the recoverer, durable tasks, the notifications of its
//     tasks). It is built before the fronts, which are each built in one
//     step on it: nothing below the Handler calls a front.
//   - The upstream side, internal/upstreamside (Side: era probe, owner
//     sessions, forwarding, relay, keep-alive, the fronts' own requests;
//     no front uses the upstream.Client directly). The Handler holds the
//     client too, for what is its own (health.go: the upstream's health
//     checks; the observer of every upstream call, for the metrics), and
//     hands it to internal/identity (the OAuth discovery pass-through)
//     and to the runner, whose workers make their tasks' calls with it.
//   - The policy decider, internal/decide (Decider: policy, tool
//     catalogue, learned latency; one answer per tools/call, decide.Call);
//     the upstream side lists the upstream's tools for it when a call
//     names a tool the catalogue lacks.
//   - Identity, internal/identity: the public URL (identity.PublicURLs,
//     from Config.PublicURL or a trusted proxy's headers), OAuth
//     discovery on the gateway's origin (identity.OAuthMeta), the auth
//     guard of Config.Auth (identity.AuthGuard), the principals' freshest
//     tokens (identity.Credentials, which the runner binds its calls to),
//     sessions bound to their principals (identity.SessionGuard). The
//     Handler calls each as it routes a request; the recorder
//     (requests.go) points a 401's challenges at the gateway's metadata
//     (identity.PointChallenges).
//   - Observation: internal/obs (metrics, tracing, the request families).
//
// The files that remain in this package:
//
//   - handler.go: Handler, New, Close, Drain, ServeHTTP; the components
//     built and wired; PublicURL and ResourceMetadataURL (of
//     internal/identity's PublicURLs).
//   - config.go: Config and its defaults; Authenticator (Config.Auth's
//     type) and ParsePublicURL, from internal/identity.
//   - frontdoor.go: the front door (Origin, CORS, forwarding headers).
//   - requests.go: every request's recorder; served counts, times and
//     logs it.
//   - health.go: /healthz, /readyz (storeCheck: a Redis Cluster partly
//     out of reach is "degraded", 200, when every replica shares it),
//     CheckUpstream.
//   - status.go: Status, this replica's figures for the operator's
//     console.
//   - durable.go: the gateway's side of durable tasks (what the runner
//     asks of the parts it does not own).
//   - trends.go: TrendsConfig; starts and stops the console's trends
//     (internal/obs/trends.go) with the Handler.
//
// Below this package, each importing only those under it (the compiler
// checks it): internal/front2025 and internal/front2026 (neither imports
// the other) → internal/front → internal/fallback and internal/runner →
// internal/durable and internal/upstreamside → internal/decide →
// internal/obs → internal/core; internal/native (imported by both fronts)
// stands on internal/upstreamside and internal/core, and internal/identity
// (imported by this package only) on internal/upstreamside, internal/obs
// and internal/core. The fronts also import the packages below
// internal/front directly. None imports this package. Package gateway
// itself may import those, taskstore, upstream, policy, webhook and
// internal/mcpwire.
package gateway
