package webhook

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

func testEvent(typ string) taskstore.WebhookEvent {
	at := time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC)
	return taskstore.WebhookEvent{
		ID: "evt_t1_2", Type: typ, At: at, TaskID: "t1", Owner: testPrincipal, Tool: "deploy",
		Status: "input_required", StatusMessage: "Approve the deploy?", CreatedAt: at.Add(-5 * time.Second), Attempt: 1,
		InputMethod: "elicitation/create", InputMessage: "Deploy to prod?", ResultBytes: 1234, IsError: true,
		TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}
}

func TestRender(t *testing.T) {
	body := Render(testEvent(EventInputRequired), "https://console.example.com/")
	var p struct {
		Type      string
		Timestamp time.Time
		Data      map[string]any
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != EventInputRequired || !p.Timestamp.Equal(testEvent("").At) {
		t.Fatalf("type/timestamp: %s", body)
	}
	want := map[string]any{
		"eventId": "evt_t1_2", "taskId": "t1", "tool": "deploy", "status": "input_required", "statusMessage": "Approve the deploy?",
		"principal": testPrincipal, "createdAt": "2026-03-01T12:00:00Z", "lastUpdatedAt": "2026-03-01T12:00:05Z", "attempt": 1.0,
		"input":      map[string]any{"method": "elicitation/create", "message": "Deploy to prod?"},
		"consoleUrl": "https://console.example.com/tasks/t1",
	}
	for k, v := range want {
		if got, _ := json.Marshal(p.Data[k]); string(got) != mustJSON(v) {
			t.Errorf("data.%s = %s, want %s", k, got, mustJSON(v))
		}
	}
	if _, ok := p.Data["result"]; ok {
		t.Errorf("input_required carries a result: %s", body)
	}
	out := Render(testEvent(EventCompleted), "")
	if !strings.Contains(string(out), `"result":{"bytes":1234,"isError":true}`) || strings.Contains(string(out), "consoleUrl") || strings.Contains(string(out), `"input"`) {
		t.Errorf("completed: %s", out)
	}
}

// TestRenderNeverCarriesCredentials: an owner that is an Authorization's
// hash or a session is shown as its kind and a short digest, never as
// itself; and the event has no field through which arguments, answers or
// results could pass (Render takes only WebhookEvent's metadata).
func TestRenderNeverCarriesCredentials(t *testing.T) {
	for _, owner := range []string{"auth:" + strings.Repeat("ab", 32), "session:4f0c9b0e-secret-session", "anon:t1", "anonymous"} {
		ev := testEvent(EventCompleted)
		ev.Owner = owner
		body := string(Render(ev, ""))
		_, rest, _ := strings.Cut(owner, ":")
		if rest != "" && rest != ev.TaskID && strings.Contains(body, rest) {
			t.Errorf("owner %q appears in %s", owner, body)
		}
		kind, _, _ := strings.Cut(owner, ":")
		if kind == "anon" {
			kind = "anonymous"
		}
		if !strings.Contains(body, `"principal":"`+kind+`:`) {
			t.Errorf("owner %q: principal not its kind and digest: %s", owner, body)
		}
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
