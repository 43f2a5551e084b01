package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// relatedTaskKey is the _meta key that ties a message to its task
// (tasks-2025-11-25 "Associating Task-Related Messages").
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// ownerOf is the authorization context a task is bound to (DESIGN.md
// invariant 3; tasks-2025-11-25 "Task Isolation and Access Control"): the
// SHA-256 of the Authorization header when there is one, else the session,
// else "anonymous", where the unguessable task id is the only bearer.
func ownerOf(r *http.Request) string {
	if auth := r.Header.Get("Authorization"); auth != "" {
		sum := sha256.Sum256([]byte(auth))
		return "auth:" + hex.EncodeToString(sum[:])
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		return "session:" + sid
	}
	return "anonymous"
}

// shortOwner is the owner for logs: enough to correlate, never the secret.
func shortOwner(owner string) string {
	if len(owner) > 21 {
		return owner[:21]
	}
	return owner
}

// wireTime formats task timestamps as RFC 3339 (ISO 8601) in UTC with
// milliseconds, as the spec's examples do.
func wireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// legacyTask is the 2025-11-25 Task object (schema-2025-11-25.ts Task).
type legacyTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

func toLegacyTask(t *taskstore.Task) legacyTask {
	return legacyTask{
		TaskID:        t.ID,
		Status:        string(t.Status),
		StatusMessage: t.StatusMessage,
		CreatedAt:     wireTime(t.CreatedAt),
		LastUpdatedAt: wireTime(t.LastUpdatedAt),
		TTL:           t.TTL.Milliseconds(),
		PollInterval:  t.PollInterval.Milliseconds(),
	}
}

// withMeta returns the JSON object obj with _meta[key] = value added,
// keeping every other field (and other _meta keys) as they were. obj may be
// empty (then it is {}). A non-object obj is returned unchanged.
func withMeta(obj json.RawMessage, key string, value any) json.RawMessage {
	m := map[string]json.RawMessage{}
	if len(obj) > 0 && string(obj) != "null" {
		if err := json.Unmarshal(obj, &m); err != nil {
			return obj
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	v, _ := json.Marshal(value)
	meta[key] = v
	m["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(m)
	if err != nil {
		return obj
	}
	return out
}

// relatedTask is the value of the related-task _meta key.
func relatedTask(id string) map[string]string { return map[string]string{"taskId": id} }

// writeResult writes a JSON-RPC success response for request id.
func writeResult(w http.ResponseWriter, id json.RawMessage, result any) {
	raw, ok := result.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(result); err != nil {
			writeRPCError(w, id, rpcError(err))
			return
		}
		writeMarshalled(w, id, raw) // fastpath.go: raw needs no second pass
		return
	}
	writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: id, Result: raw})
}

// rpcResponse is a JSON-RPC response on the wire.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// rpcRequest is a JSON-RPC request or notification the gateway sends.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}
