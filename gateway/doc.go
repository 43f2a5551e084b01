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
//	                        │     anything else         → upstreamSide.forward
//	                        ├─ GET  (a session's SSE stream) → relay (+ task notifications)
//	                        └─ DELETE (end of session)       → relay
//
//	fronts ─▶ decider (decide.go: policy, tool catalogue, learned latency)
//	       ─▶ runner (runner*.go: tasks' upstream calls, leases, recovery)
//	       ─▶ upstreamSide (upstream*.go: era, owner sessions, forwarding)
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
// Errors become JSON-RPC errors in one function, rpcError (errors.go),
// with the codes and HTTP statuses of internal/mcpwire, and are logged
// once, where the request ends.
package gateway
