package e2e

import (
	"encoding/json"
	"reflect"
	"testing"
)

// gatewayTasksCapability is what the gateway adds to the capabilities of a
// 2025-11-25 session: the one way its initialize differs from the
// upstream's (MCP 2025-11-25, Tasks (utilities/tasks), section "Server
// Capabilities").
var gatewayTasksCapability = map[string]any{
	"list": map[string]any{}, "cancel": map[string]any{},
	"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
}

// tasksExtensionID is the SEP-2663 extension the gateway declares at
// server/discover.
const tasksExtensionID = "io.modelcontextprotocol/tasks"

// withoutTasksCapability removes the gateway's tasks capability from every
// "capabilities" object in the JSON document raw, and checks that it was
// there exactly `want` times with exactly the expected value, so the
// difference between a direct and a gateway run is pinned, not ignored.
func withoutTasksCapability(t *testing.T, raw []byte, want int) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	found := 0
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			if caps, ok := v["capabilities"].(map[string]any); ok {
				// 2026-07-28 (SEP-2663): the extension, at server/discover.
				if ext, ok := caps["extensions"].(map[string]any); ok {
					if val, ok := ext[tasksExtensionID]; ok {
						if !reflect.DeepEqual(val, map[string]any{}) {
							t.Errorf("extensions[%s] = %v, want {}", tasksExtensionID, val)
						}
						delete(ext, tasksExtensionID)
						if len(ext) == 0 {
							delete(caps, "extensions")
						}
						found++
					}
				}
				if tasks, ok := caps["tasks"]; ok {
					if !reflect.DeepEqual(tasks, gatewayTasksCapability) {
						t.Errorf("capabilities.tasks = %v, want %v", tasks, gatewayTasksCapability)
					}
					delete(caps, "tasks")
					found++
				}
			}
			if caps, ok := v["serverCapabilities"].(map[string]any); ok {
				walk(map[string]any{"capabilities": caps})
			}
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	if found != want {
		t.Errorf("the gateway's tasks capability appeared %d times, want %d", found, want)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return canonical(t, out)
}
