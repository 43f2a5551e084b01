// Package gateway is taskgate's http.Handler: the MCP Streamable HTTP front
// that clients talk to, in front of one unmodified upstream MCP server.
//
//	client ──HTTP──▶ Handler.ServeHTTP
//	                   ├─ /healthz, /readyz
//	                   └─ Config.Path (default /mcp)
//	                        ├─ POST ── read (max body) ─ parse JSON-RPC ─ route
//	                        │             bad input → precise JSON-RPC error / HTTP status
//	                        │             everything not handled here → relay
//	                        ├─ GET  (the session's SSE stream)  → relay
//	                        └─ DELETE (end of session)           → relay
//	relay: upstream.Client.Forward, headers both ways minus hop-by-hop,
//	status unchanged, SSE events flushed one by one as they arrive.
//
// The relay is faithful: bytes the gateway does not handle reach the other
// side unchanged, including unknown fields and headers. A client that goes
// away cancels the upstream HTTP request (the request context), which is
// all a transparent proxy may do: MCP says a dropped connection is not a
// cancellation ("Cancellation", streamable-http-2026-07-28.mdx), so no
// notifications/cancelled is invented on the client's behalf.
//
// Errors are turned into JSON-RPC errors in one place, rpcError in
// errors.go, and logged once, where the request ends.
package gateway
