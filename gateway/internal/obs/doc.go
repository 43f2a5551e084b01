// Package obs is how the gateway is observed: its Prometheus metrics and
// its OpenTelemetry spans.
//
//   - metrics.go: Metrics, the registry served on /metrics, with every
//     family the gateway records (the list is at the type, and in
//     docs/operations.md); LiveTask, one task's place in the live gauge;
//     StoreHook, which times the store's Redis commands; the bounded
//     method and tool labels; the two request families
//     (taskgate_requests_total, taskgate_request_duration_seconds) and the
//     outcome label of a status.
//   - reruns.go: taskgate_task_reruns_total{tool,cause}, the attempts of
//     rerunnable tasks this replica began again (docs/durable.md).
//   - refusals.go: taskgate_refusals_total{reason} and the sampled log
//     of refusals that keep one principal from starving another.
//   - trends.go: Trends, the console's per-minute figures of tasks per
//     tool (started, ended, durations, input waits, reruns), counted in
//     memory through Metrics and written to the store by a flusher.
//   - tracing.go: Tracing, the server span of each MCP request, the span of
//     each task (its ids minted at creation and kept in the task record,
//     recorded once the task ends, on whichever replica ends it), links
//     from polls and cancels; TraceIDGenerator for the SDK.
//
// It may import internal/core, taskstore, upstream and internal/mcpwire,
// and nothing else of the gateway: `go list -deps` of this package names
// no other gateway package.
package obs
