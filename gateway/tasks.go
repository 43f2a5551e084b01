package gateway

// What the fronts and the runner share about a task: its owner, and its
// two wire shapes (a 2025-11-25 Task, an extension Task).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// The protocol versions the gateway speaks itself.
const (
	// version2025 is the session protocol whose tasks (MCP 2025-11-25,
	// Tasks) the gateway serves.
	version2025 = "2025-11-25"
	// version2026 is the one stateless protocol version (SEP-2575) the
	// gateway serves.
	version2026 = "2026-07-28"
)

// relatedTaskKey is the _meta key that ties a message to its task (MCP
// 2025-11-25, Tasks, "Associating Task-Related Messages").
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// tasksExtension is the SEP-2663 extension identifier.
const tasksExtension = "io.modelcontextprotocol/tasks"

// anonymousOwner owns the tasks of a client that sends no Authorization
// and no session.
const anonymousOwner = "anonymous"

// ownerOf is the authorization context a task is bound to
// (docs/ARCHITECTURE.md invariant 3; MCP 2025-11-25, Tasks, "Task Isolation
// and Access Control"): the SHA-256 of the Authorization header when there
// is one, else the session, else anonymousOwner, where the unguessable task
// id is the only bearer.
func ownerOf(r *http.Request) string {
	if auth := r.Header.Get("Authorization"); auth != "" {
		sum := sha256.Sum256([]byte(auth))
		return "auth:" + hex.EncodeToString(sum[:])
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		return "session:" + sid
	}
	return anonymousOwner
}

// shortOwner is the owner for logs: enough to correlate, never the secret.
func shortOwner(owner string) string {
	if len(owner) > 21 {
		return owner[:21]
	}
	return owner
}

// forwardedAuth is the part of the client's headers the gateway sends on
// its own upstream requests for the client: its credentials.
func forwardedAuth(r *http.Request) http.Header {
	h := http.Header{}
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		h["Authorization"] = v
	}
	return h
}

// newUpstreamID mints the id of a request the gateway sends upstream on
// its own behalf: never one a client could also use on the session.
func newUpstreamID() jsonrpc.ID {
	id, _ := jsonrpc.MakeID("taskgate-" + uuid.NewString())
	return id
}

// wireTime formats task timestamps as RFC 3339 (ISO 8601) in UTC with
// milliseconds, as the specs' examples do.
func wireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// toolsCallParams is the part of tools/call params the gateway reads.
type toolsCallParams struct {
	Name string `json:"name"`
	// Task is the 2025-11-25 task augmentation (MCP 2025-11-25, Tasks,
	// "Creating Tasks").
	Task *struct {
		TTL *float64 `json:"ttl"`
	} `json:"task"`
}

// task2025 is the 2025-11-25 Task object (MCP 2025-11-25 schema, Task).
type task2025 struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

func toTask2025(t *taskstore.Task) task2025 {
	return task2025{
		TaskID:        t.ID,
		Status:        string(t.Status),
		StatusMessage: t.StatusMessage,
		CreatedAt:     wireTime(t.CreatedAt),
		LastUpdatedAt: wireTime(t.LastUpdatedAt),
		TTL:           t.TTL.Milliseconds(),
		PollInterval:  t.PollInterval.Milliseconds(),
	}
}

// task2026 is the extension's Task and, with its status payload inlined,
// its DetailedTask (SEP-2663 schema).
type task2026 struct {
	ResultType     string                            `json:"resultType,omitempty"`
	TaskID         string                            `json:"taskId"`
	Status         string                            `json:"status"`
	StatusMessage  string                            `json:"statusMessage,omitempty"`
	CreatedAt      string                            `json:"createdAt"`
	LastUpdatedAt  string                            `json:"lastUpdatedAt"`
	TTLMs          int64                             `json:"ttlMs"`
	PollIntervalMs int64                             `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage                   `json:"result,omitempty"`
	Error          json.RawMessage                   `json:"error,omitempty"`
	InputRequests  map[string]taskstore.InputRequest `json:"inputRequests,omitempty"`
	Meta           map[string]any                    `json:"_meta,omitempty"`
}

// toTask2026 renders t. detailed inlines the status payload: result when
// completed, error when failed, the outstanding input requests when
// input_required.
func toTask2026(t *taskstore.Task, resultType string, detailed bool) task2026 {
	mt := task2026{
		ResultType:     resultType,
		TaskID:         t.ID,
		Status:         string(t.Status),
		StatusMessage:  t.StatusMessage,
		CreatedAt:      wireTime(t.CreatedAt),
		LastUpdatedAt:  wireTime(t.LastUpdatedAt),
		TTLMs:          t.TTL.Milliseconds(),
		PollIntervalMs: t.PollInterval.Milliseconds(),
	}
	if !detailed {
		return mt
	}
	switch t.Status {
	case taskstore.StatusCompleted:
		// A session upstream's result lacks resultType, which 2026-07-28
		// requires on every result (MCP 2026-07-28 schema, Result).
		mt.Result = statelessResult("tools/call", t.Result)
	case taskstore.StatusFailed:
		mt.Error = t.Error
		if len(mt.Error) == 0 {
			mt.Error = internalError(t.StatusMessage)
		}
	case taskstore.StatusInputRequired:
		mt.InputRequests = t.InputRequests
	}
	return mt
}

// cacheable are the methods whose 2026-07-28 results are CacheableResults
// (ttlMs and cacheScope required; MCP 2026-07-28 schema).
var cacheable = map[string]bool{
	"tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true,
}

// statelessResult adds what a 2026-07-28 result must carry and a session
// upstream's lacks: resultType (MCP 2026-07-28 schema, Result: "Servers
// implementing this protocol version MUST include this field"), and for a
// CacheableResult ttlMs and cacheScope (0 and "private": the gateway knows
// nothing about how long it stays valid or whom it is for).
func statelessResult(method string, result json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil || m == nil {
		return result
	}
	setDefault(m, "resultType", `"complete"`)
	if cacheable[method] {
		setDefault(m, "ttlMs", "0")
		setDefault(m, "cacheScope", `"private"`)
	}
	return mcpwire.MustMarshal(m)
}

func setDefault(m map[string]json.RawMessage, key, value string) {
	if _, ok := m[key]; !ok {
		m[key] = json.RawMessage(value)
	}
}

// isErrorResult reports whether a CallToolResult has isError: true.
func isErrorResult(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}
