// Package e2e holds taskgate's end-to-end tests: they build the real
// taskgate binary, start it in front of real upstream MCP servers
// (internal/testupstream), and drive it with real clients — the go-sdk
// client in-process and the TypeScript SDK client under node (js/:
// client.mjs for plain MCP, tasks.mjs for 2025-11-25 tasks).
//
// 2026-07-28 tasks (the SEP-2663 extension) are driven by a raw-HTTP client
// (client2026_test.go, scenarios in tasks2026_test.go) and by the official
// @modelcontextprotocol/ext-tasks requester package on the TypeScript SDK v2
// client (js/ext-tasks.mjs, exttasks_test.go), in front of a modern
// (stateless) and a legacy (session) upstream, on one replica and on two
// sharing a real redis-server.
//
// A 2025-11-25 TypeScript client of go-sdk's conformance server run as a
// stdio child that also speaks 2026-07-28 (js/stdio-child-2025.mjs,
// stdio_versions_test.go) gets the child's log messages, elicitation and
// sampling, on plain calls and inside tasks.
//
// Run them with
//
//	go test -race ./e2e/
//	go test ./e2e/ -run Transcript -update   # rewrite testdata/*.golden.json
//
// TASKGATE_E2E_BIN=/path/to/taskgate skips the build and tests that binary.
// The TypeScript client needs node and npm on PATH; the tests run `npm ci`
// in js/ themselves when js/node_modules is missing.
package e2e
