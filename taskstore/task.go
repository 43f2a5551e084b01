package taskstore

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Status is a task's status, spelled exactly as on the wire
// (MCP 2025-11-25, Tasks (utilities/tasks), section "Task Status"; SEP-2663
// (io.modelcontextprotocol/tasks extension), Task.status).
type Status string

const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Statuses lists every status, non-terminal first.
var Statuses = []Status{StatusWorking, StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled}

// Terminal reports whether s is completed, failed or cancelled. Terminal
// states never change ("Task Status Lifecycle").
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusWorking, StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Protocol says which protocol the client that created a task speaks; the
// gateway answers tasks/* in that shape.
type Protocol string

const (
	// Protocol2025 is the 2025-11-25 tasks utility (sessions, tasks/result).
	Protocol2025 Protocol = "legacy"
	// Protocol2026 is the SEP-2663 io.modelcontextprotocol/tasks extension.
	Protocol2026 Protocol = "modern"
	// ProtocolFallback is a task of a client that can do no tasks, which
	// it follows through the gateway's fallback task tools
	// (--fallback-tools); no task notification is sent for it.
	ProtocolFallback Protocol = "fallback"
)

// InputRequest is one outstanding server-to-client request of a task: an
// elicitation/create, sampling/createMessage, roots/list… that the upstream
// asked for. Its key in Task.InputRequests is unique for the task's lifetime
// (SEP-2663 "Input Requests").
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
	// Digest, when set, names the question (its method and params) so
	// that the client's answer is kept under it for a rerun to give again
	// (rerun.go). Not part of the stored request.
	Digest string `json:"-"`
}

// Lease says which replica runs a task's upstream call, and until when.
// The zero Lease means nobody holds it.
type Lease struct {
	Holder   string
	Deadline time.Time
}

// Upstream records which upstream request and session a task's tools/call
// runs on. The gateway passes the upstream's Mcp-Session-Id through to the
// client, so SessionID is also the legacy client's session: whichever
// replica changes the task publishes notifications/tasks/status to it.
// RequestID names the call for whoever inspects the record in Redis.
// Nothing re-sends or resumes a call from these fields: the call lives in
// its worker, and a task whose worker is gone is failed by recovery
// (lease.go), or run again from the gateway's own record of the call
// (Task.Rerun, rerun.go). Both fields are optional and opaque to the store.
type Upstream struct {
	// RequestID is the JSON-RPC id of the tools/call sent upstream.
	RequestID json.RawMessage
	// SessionID is the upstream Mcp-Session-Id; empty for a stateless
	// upstream.
	SessionID string
}

// Task is one task record as stored.
type Task struct {
	ID       string
	Owner    string
	Tool     string
	Protocol Protocol

	Status        Status
	StatusMessage string
	CreatedAt     time.Time
	LastUpdatedAt time.Time
	// TTL is counted from CreatedAt; the task's keys expire then.
	TTL          time.Duration
	PollInterval time.Duration

	// Result is the JSON-RPC result of the underlying request (a
	// CallToolResult, possibly with isError), once there is one.
	Result json.RawMessage
	// Error is the JSON-RPC error object of the underlying request, if it
	// ended in one.
	Error json.RawMessage

	// InputRequests are the outstanding (unanswered) input requests. The
	// gateway shows them only while Status is input_required.
	InputRequests map[string]InputRequest
	// InputResponses are answers recorded by AnswerInputs that the worker has
	// not taken yet (TakeInputResponses).
	InputResponses map[string]json.RawMessage

	// Progress is the latest progress notification params, verbatim.
	Progress        json.RawMessage
	CancelRequested bool
	Lease           Lease
	Upstream        Upstream
	// Trace is what the gateway keeps of the task's span (its ids), "" when
	// tracing is off.
	Trace string
	// Durable tasks (rerun.go): what running the call again needs (nil:
	// never run again), how many attempts started (1 until a rerun), when
	// the latest may start and why the one before it ended, the upstream's
	// own task the call holds, and the answers the client gave, by the
	// digest of the question.
	Rerun        []byte
	Attempts     int
	NextAttempt  time.Time
	LastCause    string
	UpstreamTask string
	Answered     map[string]json.RawMessage
}

// ExpiresAt is when the task's keys expire: TTL after creation.
func (t *Task) ExpiresAt() time.Time { return t.CreatedAt.Add(t.TTL) }

// Hash field names of the task record (key taskKey). Input requests live in
// the same hash under prefixed fields so that Get is one HGETALL:
//
//	in:<key>   outstanding request, JSON {method, params}
//	re:<key>   response recorded by AnswerInputs, not yet taken by the worker
//	used:<key> for every key ever issued, for lifetime uniqueness: the
//	           write id of the AddInputRequests that issued it, or "1"
//	write      the write id of the terminal write (Outcome.WriteID)
//	tk:<key>   response handed to the worker by the take with id "take"
//	           (TakeInputResponses), kept until the next take
const (
	fID           = "id"
	fOwner        = "owner"
	fTool         = "tool"
	fFlavour      = "flavour"
	fStatus       = "status"
	fMessage      = "message"
	fCreated      = "created"  // unix ms
	fUpdated      = "updated"  // unix ms
	fTTL          = "ttl"      // ms
	fPoll         = "poll"     // ms
	fResult       = "result"   // raw JSON
	fError        = "error"    // raw JSON
	fProgress     = "progress" // raw JSON
	fCancel       = "cancel"   // "1" once cancellation was requested
	fPending      = "pending"  // number of in:* fields
	fLeaseHolder  = "lease_holder"
	fLeaseUntil   = "lease_until" // unix ms
	fLeaseFrom    = "lease_from"  // the holder the first takeover (Claim) took the lease from
	fUpRequestID  = "up_request_id"
	fUpSession    = "up_session"
	fTrace        = "trace"        // the task span's ids (the gateway's tracing), absent when off
	fRerun        = "rerun"        // the gateway's rerun spec (rerun.go)
	fAttempts     = "attempts"     // attempts started; absent: 1
	fNextAttempt  = "next_attempt" // unix ms: the latest attempt starts then
	fLastCause    = "last_cause"   // why the attempt before the latest ended
	fUpTask       = "up_task"      // the upstream's own task the call holds
	prefixDigest  = "dg:"          // dg:<key>: the question's digest (rerun.go)
	prefixAnswer  = "ans:"         // ans:<digest>: the client's answer to it
	prefixIn      = "in:"
	prefixResp    = "re:"
	prefixUsedKey = "used:"
)

func ms(d time.Duration) int64 { return d.Milliseconds() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// decodeTask turns the fields of a task hash into a Task. It returns false
// when the hash is empty or lacks the fields every task has.
func decodeTask(m map[string]string) (*Task, bool) {
	if len(m) == 0 || m[fID] == "" || m[fStatus] == "" {
		return nil, false
	}
	num := func(f string) int64 {
		n, _ := strconv.ParseInt(m[f], 10, 64)
		return n
	}
	raw := func(f string) json.RawMessage {
		if v, ok := m[f]; ok && v != "" {
			return json.RawMessage(v)
		}
		return nil
	}
	t := &Task{
		ID:              m[fID],
		Owner:           m[fOwner],
		Tool:            m[fTool],
		Protocol:        Protocol(m[fFlavour]),
		Status:          Status(m[fStatus]),
		StatusMessage:   m[fMessage],
		CreatedAt:       fromMS(num(fCreated)),
		LastUpdatedAt:   fromMS(num(fUpdated)),
		TTL:             time.Duration(num(fTTL)) * time.Millisecond,
		PollInterval:    time.Duration(num(fPoll)) * time.Millisecond,
		Result:          raw(fResult),
		Error:           raw(fError),
		Progress:        raw(fProgress),
		CancelRequested: m[fCancel] == "1",
		Trace:           m[fTrace],
		Upstream: Upstream{
			RequestID: raw(fUpRequestID),
			SessionID: m[fUpSession],
		},
	}
	if v := m[fRerun]; v != "" {
		t.Rerun = []byte(v)
		t.Attempts = max(int(num(fAttempts)), 1)
		t.LastCause, t.UpstreamTask = m[fLastCause], m[fUpTask]
		if n := num(fNextAttempt); n > 0 {
			t.NextAttempt = fromMS(n)
		}
	}
	if h := m[fLeaseHolder]; h != "" {
		t.Lease = Lease{Holder: h, Deadline: fromMS(num(fLeaseUntil))}
	}
	for f, v := range m {
		switch {
		case strings.HasPrefix(f, prefixIn):
			var r InputRequest
			if json.Unmarshal([]byte(v), &r) != nil {
				continue // only this package writes these fields
			}
			if t.InputRequests == nil {
				t.InputRequests = map[string]InputRequest{}
			}
			t.InputRequests[f[len(prefixIn):]] = r
		case strings.HasPrefix(f, prefixAnswer):
			if t.Answered == nil {
				t.Answered = map[string]json.RawMessage{}
			}
			t.Answered[f[len(prefixAnswer):]] = json.RawMessage(v)
		case strings.HasPrefix(f, prefixResp):
			if t.InputResponses == nil {
				t.InputResponses = map[string]json.RawMessage{}
			}
			t.InputResponses[f[len(prefixResp):]] = json.RawMessage(v)
		}
	}
	return t, true
}

// decodePairs turns a flat [field, value, field, value…] reply (HGETALL
// inside a script) into a map.
func decodePairs(vals []interface{}) map[string]string {
	m := make(map[string]string, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		k, _ := vals[i].(string)
		v, _ := vals[i+1].(string)
		m[k] = v
	}
	return m
}
