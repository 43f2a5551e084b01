package upstreamside

import (
	"encoding/json"
	"testing"
)

// FuzzListenFilter: whatever a client's filter, the upstream's initialize
// result and a notification hold, granting and filtering never panic, the
// grant is within what was asked, and a notification passes only a
// filter that asked for its kind.
func FuzzListenFilter(f *testing.F) {
	f.Add(`{"toolsListChanged":true,"resourceSubscriptions":["file:///a/"]}`,
		`{"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}}}`,
		"notifications/resources/updated", `{"uri":"file:///a/b"}`)
	f.Add(`{"promptsListChanged":true}`, `{"capabilities":null}`, "notifications/prompts/list_changed", `null`)
	f.Add(`{"resourceSubscriptions":[""]}`, `[]`, "notifications/resources/updated", `{"uri":""}`)
	f.Fuzz(func(t *testing.T, filter, init, method, params string) {
		var want ListenFilter
		if json.Unmarshal([]byte(filter), &want) != nil {
			return
		}
		got := want.offered(json.RawMessage(init))
		if got.ToolsListChanged && !want.ToolsListChanged || got.PromptsListChanged && !want.PromptsListChanged ||
			got.ResourcesListChanged && !want.ResourcesListChanged || len(got.ResourceSubscriptions) > len(want.ResourceSubscriptions) {
			t.Fatalf("granted %+v of %+v", got, want)
		}
		if got.Wants(method, json.RawMessage(params)) {
			switch method {
			case "notifications/tools/list_changed", "notifications/prompts/list_changed",
				"notifications/resources/list_changed", "notifications/resources/updated":
			default:
				t.Fatalf("%s passed %+v", method, got)
			}
		}
		if (ListenFilter{}).Wants(method, json.RawMessage(params)) {
			t.Fatalf("%s passed an empty filter", method)
		}
	})
}
