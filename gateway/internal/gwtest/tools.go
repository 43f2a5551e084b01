package gwtest

import (
	"encoding/json"
	"strings"
	"testing"
)

// ToolAnswer is a CallToolResult of the fallback task tools, or of a
// call they answered early: its text, the task it names and how it
// stands.
type ToolAnswer struct {
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent struct {
		TaskID        string                     `json:"taskId"`
		Status        string                     `json:"status"`
		PollInterval  int64                      `json:"pollIntervalMs"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	} `json:"structuredContent"`
	IsError bool `json:"isError"`
}

// Text is the answer's text, its parts joined.
func (a ToolAnswer) Text() string {
	var b strings.Builder
	for _, c := range a.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// ToolNames are the names of a tools/list result's tools.
func ToolNames(t testing.TB, result json.RawMessage) map[string]bool {
	t.Helper()
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(result, &res); err != nil {
		t.Fatalf("tools/list result %s: %v", result, err)
	}
	out := map[string]bool{}
	for _, tl := range res.Tools {
		out[tl.Name] = true
	}
	return out
}
