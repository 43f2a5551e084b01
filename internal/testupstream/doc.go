// Package testupstream is the unmodified, synchronous MCP server that every
// taskgate test and benchmark puts behind the gateway.
//
// It is a plain go-sdk server (mcp.NewServer + mcp.NewStreamableHTTPHandler)
// with no task support, so everything taskgate adds must come from the
// gateway. Every tool is deterministic, so results taken directly and through
// the gateway can be compared byte for byte:
//
//	echo      {text}             → text
//	slow      {seconds, text}    → "slept <seconds> s: <text>" after sleeping (default 3 s)
//	elicit    {}                 → form elicitation for "name" → "Hello, <name>!"
//	progress  {steps, delayMs}   → <steps> notifications/progress, then "done <steps>"
//	sample    {prompt}           → sampling/createMessage → the sampled text
//	roots     {}                 → roots/list → the root URIs joined with ","
//	fail      {}                 → CallToolResult{isError:true} "tool failed: deliberate failure"
//	rpcerror  {code}             → a JSON-RPC error (default code RPCErrorCode)
//
// With [Options.Elicit2], one more:
//
//	elicit2   {}                 → two form elicitations at once, "name" and "color"
//	                               → "Hello, <name>! You like <color>."
//
// The server speaks the era it is configured for: stateful (legacy sessions,
// 2025-11-25 and older; server→client requests on the tools/call SSE stream)
// or [Options.Stateless] (modern 2026-07-28, where input is asked for with a
// multi round-trip "input_required" result instead).
//
// A [Recorder] in [Options] sees every tool call start, finish and get
// cancelled, so a test can assert that a cancellation reached the upstream.
package testupstream
