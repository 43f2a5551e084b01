// Package front2025 is the 2025-11-25 front, Front: a client that opens a
// session with initialize. For a session that negotiates 2025-11-25 the
// gateway is the tasks receiver (MCP 2025-11-25, Tasks): it answers
// tasks/* itself, decides task-augmented tools/call, and relays the task's
// input requests; every other request of the session passes through to
// the upstream unchanged. Older clients pass through, and still teach the
// tools' latency. In front of a stateless 2026-07-28 upstream the gateway
// is the session itself (stateless.go). The initialize sequence is told at
// the top of initialize.go.
//
//   - front2025.go: Front (front.Deps, the store, its parts below) and
//     New; store, what it needs of the task store; UpstreamHeader,
//     cachedSession, recheckSession (sessionTable's, exported),
//     ServeEmulatedSession (heldSessions').
//   - serve.go: Serve, the routing of a session's request; StreamOrEnd,
//     the upstream's answer to a session's GET or DELETE.
//   - initialize.go: initialize and its answer (tasksCapability, the
//     capabilities presented), the session recorded before the client
//     learns it.
//   - sessions.go: sessionTable, what each session negotiated
//     (sessionInfo), in the store and an in-process cache (sessionCache)
//     re-checked with the store; the header with MCP-Protocol-Version
//     rewritten to the upstream's; a held session's anonymous place renewed.
//   - toolslist.go: tools/list, each tool's execution.taskSupport as the
//     policy makes it.
//   - call.go: tools/call: passed through, a plain call, or a task
//     (startTask).
//   - native.go: nativeTasks, the upstream's own task tools, passed
//     through and recorded per owner (internal/native), their tasks/*
//     forwarded on the task's upstream session, a lost one failed.
//   - tasks.go: tasks/get (front.Deps.GetTask), tasks/list, tasks/cancel,
//     and the answer of tasks/result for a terminal task.
//   - result.go: the blocking tasks/result stream (resultStream), which
//     also carries a task's input requests to the client.
//   - input.go: the client's answers (JSON-RPC responses) to input
//     requests, on any replica.
//   - notify.go: the session's GET stream: the upstream's merged with the
//     notifications the runner publishes of the session's tasks
//     (relayMerged; internal/runner/notify.go).
//   - stateless.go: heldSessions, the gateway as the session of a
//     2025-11-25 (or older) client in front of a stateless upstream
//     (heldStore, what it needs of the store): initialize from
//     server/discover, each request made stateless, its tools/call run by
//     the runner; its GET and DELETE (Front.ServeEmulatedSession); callFor.
//   - stateless_stream.go: what such a session changes after initialize
//     (logging/setLevel, resources/subscribe, notifications/cancelled),
//     its GET stream (the upstream's subscriptions/listen merged with the
//     task notifications), LogMessage, the anonymous session caps
//     (anonSessionSlot).
//   - fallback.go: the fallback task tools (internal/fallback) for session
//     clients without capabilities.tasks.
//
// It may import internal/front, internal/native, internal/fallback,
// internal/runner, internal/upstreamside, internal/decide, internal/obs,
// internal/core, policy, taskstore, upstream and internal/mcpwire, and
// nothing above it: not internal/front2026, not package gateway.
package front2025
