// Package durable is the gateway's pure logic of durable tasks
// (docs/durable.md): what a task records so that any replica can run its
// call again (Spec), the statusMessages a rerun shows, the backoff between
// attempts, and the digest under which a client's answer to an input
// request is kept for a rerun that asks the same question. It holds no
// state and does no I/O: the runner calls it, the task store keeps what it
// makes.
package durable

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"
)

// Spec is what a task records so that another replica, or the same one
// after a failure on the way, can run its tools/call again: the same
// arguments, the same owner (the task's), the same owner session and
// credentials. It is stored with the task (taskstore.NewTask.Rerun) as
// JSON, and read back by whichever replica takes the task over.
type Spec struct {
	// Rerun: the tool is rerunnable (Why says so); false: the spec is
	// kept only to re-attach to the upstream's own task (Native).
	Rerun bool   `json:"rerun,omitempty"`
	Why   string `json:"why,omitempty"`
	// Params are the tools/call params as sent upstream.
	Params json.RawMessage `json:"params"`
	// Session and Version are the upstream session the call runs on ("":
	// a stateless upstream) and its protocol version.
	Session string `json:"session,omitempty"`
	Version string `json:"version,omitempty"`
	// Modern: the task is a 2026-07-28 client's (job2026); Stateless: the
	// upstream speaks 2026-07-28 (MRTR rounds).
	Modern    bool `json:"modern,omitempty"`
	Stateless bool `json:"stateless,omitempty"`
	// Native: the call holds the upstream's own task (task-augmented).
	Native bool `json:"native,omitempty"`
	// ClientCaps, CallerCaps, Fallback, ClientSession and Learn are the
	// job's fields of the same names.
	ClientCaps    json.RawMessage `json:"clientCaps,omitempty"`
	CallerCaps    json.RawMessage `json:"callerCaps,omitempty"`
	Fallback      bool            `json:"fallback,omitempty"`
	ClientSession string          `json:"clientSession,omitempty"`
	Learn         string          `json:"learn,omitempty"`
	// Auth is the Authorization the call was made with, sealed (Seal);
	// CredKey the principal's client whose freshest token a rerun sends
	// instead, when the gateway keeps them (docs/identity.md).
	Auth    []byte `json:"auth,omitempty"`
	CredKey string `json:"credKey,omitempty"`
}

// Encode is the spec as stored.
func (s *Spec) Encode() []byte {
	b, _ := json.Marshal(s) // plain fields: cannot fail
	return b
}

// Decode reads a stored spec.
func Decode(b []byte) (*Spec, error) {
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("durable: the task's rerun record is unreadable: %w", err)
	}
	if len(s.Params) == 0 {
		return nil, fmt.Errorf("durable: the task's rerun record has no call")
	}
	return &s, nil
}

// CauseReplicaStopped is the cause of a rerun whose replica stopped; the
// upstream's are upstream.Cause*.
const CauseReplicaStopped = "replica_stopped"

// causeText says what a cause means, for statusMessages.
var causeText = map[string]string{
	CauseReplicaStopped:  "the replica running it stopped",
	"connection_refused": "the upstream refused the connection",
	"connection_reset":   "the upstream connection broke",
	"http_502":           "the upstream answered 502",
	"http_503":           "the upstream answered 503",
	"http_504":           "the upstream answered 504",
	"session_gone":       "the upstream lost its session",
	"process_exited":     "the upstream process exited",
}

// describe says what cause means in words.
func describe(cause string) string {
	if s, ok := causeText[cause]; ok {
		return s
	}
	return cause
}

// RerunMessage is the statusMessage of a task running again: "the replica
// running it stopped; running it again (attempt 2 of 3)".
func RerunMessage(cause string, attempt, maxAttempts int) string {
	return fmt.Sprintf("%s; running it again (attempt %d of %d)", describe(cause), attempt, maxAttempts)
}

// ExhaustedMessage is the failure of a task whose attempts ran out.
func ExhaustedMessage(attempts int, cause, detail string) string {
	msg := fmt.Sprintf("gave up after %d attempts; the last ended because %s", attempts, describe(cause))
	if detail != "" {
		msg += ": " + detail
	}
	return msg
}

// ReattachMessage is the statusMessage of a task re-attached to the
// upstream's own task on another replica.
const ReattachMessage = "the replica running it stopped; following the upstream's own task from another replica"

// Backoff is how long attempt n (2 for the first rerun) waits: base,
// doubled with each attempt, capped at limit, with up to a quarter of it
// added at random so that the tasks of a dead replica do not all start
// again at once.
func Backoff(n int, base, limit time.Duration) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 2; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, max(limit, base))
	return d + rand.N(d/4+1)
}
