package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// Payload is the body of a delivery, in the shape Standard Webhooks
// recommends ("Payload structure": type, timestamp, data).
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is what a delivery says about its task. It never carries the
// call's arguments, the client's answers or the result (SECURITY.md):
// those stay behind the task's owner; a receiver that needs them reads the
// task as its owner, or follows ConsoleURL.
type Data struct {
	EventID       string    `json:"eventId"`
	TaskID        string    `json:"taskId"`
	Tool          string    `json:"tool"`
	Status        string    `json:"status"`
	StatusMessage string    `json:"statusMessage,omitempty"`
	Principal     string    `json:"principal"`
	CreatedAt     time.Time `json:"createdAt"`
	LastUpdatedAt time.Time `json:"lastUpdatedAt"`
	Attempt       int       `json:"attempt"`
	Input         *Input    `json:"input,omitempty"`
	Result        *Result   `json:"result,omitempty"`
	ConsoleURL    string    `json:"consoleUrl,omitempty"`
}

// Input is what a task.input_required event says of the request waiting
// for a person: its method and the message shown, never an answer.
type Input struct {
	Method  string `json:"method"`
	Message string `json:"message,omitempty"`
}

// Result is what an outcome event says of the result: its size and
// whether it is an error, never its content.
type Result struct {
	Bytes   int  `json:"bytes"`
	IsError bool `json:"isError"`
}

// principalPrefix is the owner form of a validated principal (the
// gateway's core.PrincipalPrefix).
const principalPrefix = "principal:"

// Principal is the owner as a payload shows it: a validated principal's
// key as it is (a digest of issuer and subject, never a token, and what
// an endpoint's principals filter names); any other owner only as its kind
// and a short digest, like the gateway's logs (an Authorization's hash or
// a session id is a credential's stand-in, and is not sent).
func Principal(owner string) string {
	if strings.HasPrefix(owner, principalPrefix) {
		return owner
	}
	kind, _, _ := strings.Cut(owner, ":")
	if owner == "anonymous" || kind == "anon" {
		kind = "anonymous"
	}
	sum := sha256.Sum256([]byte(owner))
	return kind + ":" + hex.EncodeToString(sum[:6])
}

// Render is the body of ev's deliveries. consoleURL is the console's
// public base URL ("" for no link).
func Render(ev taskstore.WebhookEvent, consoleURL string) []byte {
	d := Data{
		EventID:       ev.ID,
		TaskID:        ev.TaskID,
		Tool:          ev.Tool,
		Status:        ev.Status,
		StatusMessage: ev.StatusMessage,
		Principal:     Principal(ev.Owner),
		CreatedAt:     ev.CreatedAt.UTC(),
		LastUpdatedAt: ev.At.UTC(),
		Attempt:       max(ev.Attempt, 1),
	}
	switch ev.Type {
	case EventInputRequired:
		d.Input = &Input{Method: ev.InputMethod, Message: ev.InputMessage}
	case EventCompleted, EventFailed:
		d.Result = &Result{Bytes: ev.ResultBytes, IsError: ev.IsError}
	}
	if consoleURL != "" {
		d.ConsoleURL = strings.TrimRight(consoleURL, "/") + "/tasks/" + url.PathEscape(ev.TaskID)
	}
	body, _ := json.Marshal(Payload{Type: ev.Type, Timestamp: ev.At.UTC(), Data: d})
	return body
}
