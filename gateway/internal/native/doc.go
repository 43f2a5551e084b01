// Package native is what both fronts share about the upstream's own tasks
// (MCP 2025-11-25, Tasks; SEP-2663) that the gateway passes through rather
// than runs: the store they are recorded in (Store), how long a record is
// kept (KeepFor), the record made (Record) or, when the store cannot make
// it, the upstream's task cancelled (Cancel), and how a task the upstream
// forgot is marked lost (MarkLost, SessionLost, TaskLost) and shown failed
// (FailedRecord, NotFoundError). Each front serves its own protocol's view
// of them (internal/front2025/native.go, internal/front2026/native.go);
// the runner's task that holds an upstream task is in
// internal/runner/native.go.
//
// It may import internal/upstreamside, internal/core, taskstore, upstream
// and internal/mcpwire, and no front.
package native
