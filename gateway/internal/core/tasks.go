package core

// What the fronts and the runner share about a task: its owner, and its
// two wire shapes (a 2025-11-25 Task, an extension Task).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// The protocol versions the gateway speaks itself.
const (
	// Version2025 is the session protocol whose tasks (MCP 2025-11-25,
	// Tasks) the gateway serves.
	Version2025 = "2025-11-25"
	// Version2026 is the one stateless protocol version (SEP-2575) the
	// gateway serves.
	Version2026 = "2026-07-28"
)

// Per-request _meta keys of 2026-07-28 (MCP 2026-07-28 schema,
// RequestMetaObject) and the result's server identity.
const (
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo      = "io.modelcontextprotocol/clientInfo"
	MetaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	MetaLogLevel        = "io.modelcontextprotocol/logLevel"
	MetaServerInfo      = "io.modelcontextprotocol/serverInfo"
)

// RelatedTaskKey is the _meta key that ties a message to its task (MCP
// 2025-11-25, Tasks, "Associating Task-Related Messages").
const RelatedTaskKey = "io.modelcontextprotocol/related-task"

// RelatedTask is the value of RelatedTaskKey for task id.
func RelatedTask(id string) map[string]string { return map[string]string{"taskId": id} }

// TasksExtension is the SEP-2663 extension identifier.
const TasksExtension = "io.modelcontextprotocol/tasks"

// AnonymousOwner stands for every client without Authorization or session
// where a shared key is harmless: the owner session of 2026-07-28 clients
// without credentials, and a session client's owner without a session.
const AnonymousOwner = "anonymous"

// anonPrefix starts the owner of an anonymous task (AnonOwner).
const anonPrefix = "anon:"

// PrincipalPrefix starts the owner of a validated principal (AuthOwner).
const PrincipalPrefix = "principal:"

// OwnerOf is the owner of a 2025-11-25 client's request
// (docs/ARCHITECTURE.md invariant 3; MCP 2025-11-25, Tasks, "Task Isolation
// and Access Control"): the SHA-256 of the Authorization header when there
// is one, else the session, which the 2025-11-25 front issued a task only
// if it recorded it at initialize (internal/front2025/sessions.go), else
// AnonymousOwner.
func OwnerOf(r *http.Request) string {
	if o := AuthOwner(r); o != "" {
		return o
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		return "session:" + sid
	}
	return AnonymousOwner
}

// AuthOwner is the owner the request's credentials make ("" without
// any). With the gateway's own validation (Config.Auth) it is the
// validated principal (issuer and subject, or client), so a refreshed
// token, a new session of the same user and any replica see the same
// tasks, limits and owner session. Without it, it is the Authorization's
// SHA-256, never the credential itself: a refreshed token is then another
// owner.
func AuthOwner(r *http.Request) string {
	if p, ok := auth.FromContext(r.Context()); ok {
		return PrincipalPrefix + p.Key()
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(auth))
	return "auth:" + hex.EncodeToString(sum[:])
}

// Owner2026 is the owner of a 2026-07-28 client's task id: its
// Authorization's, else the task's own (AnonOwner). A session id never
// counts: the 2026-07-28 front issues none, so any value a client sends
// would be an owner it picked itself.
func Owner2026(r *http.Request, taskID string) string {
	if o := AuthOwner(r); o != "" {
		return o
	}
	return AnonOwner(taskID)
}

// AnonOwner is the owner of an anonymous task: the task itself, so its id
// is its only credential (SEP-2663, "Security Considerations"), and no two
// anonymous clients share an owner's limits or tasks. Anonymous tasks are
// bounded together instead (Config.Anonymous).
func AnonOwner(taskID string) string { return anonPrefix + taskID }

// IsAnonymous reports whether owner has no credentials behind it.
func IsAnonymous(owner string) bool {
	return owner == AnonymousOwner || strings.HasPrefix(owner, anonPrefix)
}

// SessionOwner is whose owner session (internal/upstreamside/owner.go) a 2026-07-28
// request uses: its Authorization's, else the one anonymous one.
func SessionOwner(r *http.Request) string {
	if o := AuthOwner(r); o != "" {
		return o
	}
	return AnonymousOwner
}

// LogOwner is an owner for logs: its kind and a digest, enough to
// correlate lines, never a session id or credential.
func LogOwner(owner string) string {
	kind, _, _ := strings.Cut(owner, ":")
	if IsAnonymous(owner) {
		// One word in the log for both kinds ("anonymous", "anon:<task>"):
		// the digest still tells them apart.
		kind = AnonymousOwner
	}
	sum := sha256.Sum256([]byte(owner))
	return kind + ":" + hex.EncodeToString(sum[:6])
}

// Principal is whose fair share a request counts in (the runner's
// admission, the sessions of a local server: docs/operations.md, "Fair
// shares"): its credentials' owner (AuthOwner: the validated principal,
// else the Authorization's digest), else its client address. Unlike
// OwnerOf it never is a session or a task, which a client mints at will.
func Principal(r *http.Request) string {
	if o := AuthOwner(r); o != "" {
		return o
	}
	return "addr:" + ClientAddr(r)
}

// ClientAddr is the IP address of the client's connection.
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// ForwardedAuth is the part of the client's headers the gateway sends on
// its own upstream requests for the client: its credentials.
func ForwardedAuth(r *http.Request) http.Header {
	h := http.Header{}
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		// A copy: the request's values share one array with all its
		// other headers, which a held task would otherwise keep.
		h["Authorization"] = append([]string(nil), v...)
	}
	return h
}

// NewUpstreamID mints the id of a request the gateway sends upstream on
// its own behalf: never one a client could also use on the session.
func NewUpstreamID() jsonrpc.ID {
	id, _ := jsonrpc.MakeID("taskgate-" + uuid.NewString())
	return id
}

// WireTime formats task timestamps as RFC 3339 (ISO 8601) in UTC with
// milliseconds, as the specs' examples do.
func WireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// TaskParam is params.task of a task-augmented call.
// Exported because CallParams.Task, which the fronts read, names it.
type TaskParam struct {
	TTL *float64 `json:"ttl"` // exported for encoding/json, which decodes it (DecodeCall)
}

// ttl is the ttl the client asked for (0: none; nil receiver too), or the
// error for one that is not a non-negative number of milliseconds.
func (t *TaskParam) ttl() (time.Duration, *mcpwire.Error) {
	if t == nil || t.TTL == nil {
		return 0, nil
	}
	if *t.TTL < 0 || math.IsNaN(*t.TTL) {
		return 0, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "params.task.ttl must be a non-negative number of milliseconds")
	}
	return MSDuration(*t.TTL), nil
}

// TaskCall is what a 2025-11-25 tools/call with params p asks of a
// task: the ttl (0: none) and the params to send upstream, without
// params.task (the gateway's, never the upstream's).
func TaskCall(p *CallParams) (time.Duration, json.RawMessage, *mcpwire.Error) {
	ttl, e := p.Task.ttl()
	if e != nil {
		return 0, nil, e
	}
	params, err := p.WithoutTask()
	if err != nil {
		return 0, nil, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "tools/call params must be an object")
	}
	return ttl, params, nil
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

func ToTask2025(t *taskstore.Task) task2025 {
	return task2025{
		TaskID:        t.ID,
		Status:        string(t.Status),
		StatusMessage: t.StatusMessage,
		CreatedAt:     WireTime(t.CreatedAt),
		LastUpdatedAt: WireTime(t.LastUpdatedAt),
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

// ToTask2026 renders t. detailed inlines the status payload: result when
// completed, error when failed, the outstanding input requests when
// input_required.
func ToTask2026(t *taskstore.Task, resultType string, detailed bool) task2026 {
	mt := task2026{
		ResultType:     resultType,
		TaskID:         t.ID,
		Status:         string(t.Status),
		StatusMessage:  t.StatusMessage,
		CreatedAt:      WireTime(t.CreatedAt),
		LastUpdatedAt:  WireTime(t.LastUpdatedAt),
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
		mt.Result = StatelessResult("tools/call", t.Result)
	case taskstore.StatusFailed:
		mt.Error = t.Error
		if len(mt.Error) == 0 {
			mt.Error = InternalError(t.StatusMessage)
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

// StatelessResult adds what a 2026-07-28 result must carry and a session
// upstream's lacks: resultType (MCP 2026-07-28 schema, Result: "Servers
// implementing this protocol version MUST include this field"), and for a
// CacheableResult ttlMs and cacheScope (0 and "private": the gateway knows
// nothing about how long it stays valid or whom it is for).
func StatelessResult(method string, result json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil || m == nil {
		return result
	}
	SetDefault(m, "resultType", `"complete"`)
	if cacheable[method] {
		SetDefault(m, "ttlMs", "0")
		SetDefault(m, "cacheScope", `"private"`)
	}
	return mcpwire.MustMarshal(m)
}

func SetDefault(m map[string]json.RawMessage, key, value string) {
	if _, ok := m[key]; !ok {
		m[key] = json.RawMessage(value)
	}
}

// IsErrorResult reports whether a CallToolResult has isError: true.
func IsErrorResult(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}

// MSDuration is a count of milliseconds from the wire as a Duration,
// clamped where a Duration ends.
func MSDuration(ms float64) time.Duration {
	return time.Duration(math.Min(ms, float64(math.MaxInt64/int64(time.Millisecond)))) * time.Millisecond
}
