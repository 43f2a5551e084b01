// Package upstream is taskgate's client of the unmodified MCP server it
// fronts, over Streamable HTTP.
//
//	gateway (front)                         upstream MCP server
//	───────────────                         ───────────────────
//	pass-through ── Client.Forward ───────▶ POST/GET/DELETE, bytes untouched
//	worker ──────── Client.Call ──────────▶ POST request
//	                  ◀── JSON body, or SSE stream of:
//	                        notifications      → CallOptions.OnNotification
//	                        server→client reqs → CallOptions.OnRequest
//	                        the response       → returned
//	                Client.Respond ───────▶ POST the answer to a server→client request
//	                Client.Cancel ────────▶ POST notifications/cancelled
//
// Two rules shape it. First, a tool call may legitimately take twenty
// minutes, so there is no http.Client.Timeout anywhere: every call runs on
// the caller's context, and the caller sets the deadline. Second, a gateway
// holds many concurrent calls to one host, so the transport keeps a large
// idle pool per host (Go's default of 2 idle connections per host would make
// every third request dial).
//
// The wire rules come from MCP 2026-07-28, Streamable HTTP transport,
// sections "Sending Messages" and "Receiving Messages": a POSTed request is
// answered either with one application/json body or with a
// text/event-stream whose events carry server→client messages and, last,
// the response.
package upstream
