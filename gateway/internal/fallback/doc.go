// Package fallback is the fallback task tools (gateway.Config.Fallback,
// --fallback-tools): tasks for the clients that can do none. Such a
// client (a session without capabilities.tasks that sends no params.task,
// or a 2026-07-28 client without the tasks extension) calls a tool the policy makes a task
// candidate; if the call is still running after the hybrid wait, the
// client gets a plain CallToolResult naming a task id, and the call goes on
// in the runner as a task of that client, like any other (Redis, any
// replica, leases). The client follows it with four tools the gateway adds
// to its tools/list:
//
//	<prefix>task_status {taskId}               status, message, progress, the input it waits for
//	<prefix>task_result {taskId, waitSeconds?} waits (10 s, at most 50) for the tool's own result
//	<prefix>task_cancel {taskId}               cancels it
//	<prefix>task_answer {taskId, inputResponses} answers the input it waits for
//
// Input: a session client that declared elicitation (or sampling, roots)
// gets the task's input requests as server→client requests on the stream
// of its pending task_result call (internal/front2025/fallback.go); any
// client can read them in task_status and answer with task_answer.
//
// Every failure a client (or the agent behind it) can fix is a tool result
// with isError, saying what to fix; only the gateway's own failures (the
// store unreachable) are JSON-RPC errors.
//
// The tools are one component, Tools (nil: off), which both fronts hold
// (front.Deps.Fallback) and call for their own clients: the 2025-11-25
// front's part is internal/front2025/fallback.go, the 2026-07-28 front's
// internal/front2026/fallback.go.
//
//   - fallback.go: Config (gateway.FallbackTools is an alias of it),
//     DefaultPrefix and ToolNames (the four names, checked against MCP's
//     tool name charset); Store, what the tools need of the task store;
//     Tools and New; Is, ParseArgs and Args (a call of one of the tools
//     and its arguments), Serve (task_status, task_result, task_cancel,
//     task_answer), StoreFailure; the results a front writes: Started (the
//     CallToolResult naming the task), StatusResult, Outcome (the tool's
//     own result), BadArgs; AwaitQuestion, the brief wait for the input
//     request a call asked before it became the task; AppendTools and FirstPage, the tools added to a
//     tools/list answer.
//
// It may import internal/obs, internal/core, taskstore and
// internal/mcpwire, and nothing above it: no front, not the runner.
package fallback
