package front2025

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzListenEvent: whatever an upstream's subscriptions/listen stream
// carries, a 2025-11-25 GET stream gets either nothing or one SSE event
// holding a JSON-RPC notification it asked for, without the stream's
// subscription id.
func FuzzListenEvent(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}`,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://a","_meta":{"io.modelcontextprotocol/subscriptionId":"x","k":1}}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`,
		`{"jsonrpc":"2.0","id":"l","result":{"_meta":{}}}`,
		`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":[1]}`,
		`{"method":"notifications/resources/updated","params":{"_meta":null}}`,
		``, `null`, `[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := listenEvent(data)
		if out == nil {
			return
		}
		payload, ok := strings.CutPrefix(string(out), "event: message\ndata: ")
		if !ok || !strings.HasSuffix(payload, "\n\n") || strings.Count(payload, "\n") != 2 {
			t.Fatalf("not one SSE data event: %q", out)
		}
		var n struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal([]byte(payload), &n); err != nil || n.ID != nil || n.Method == "" {
			t.Fatalf("not a notification: %q (%v)", payload, err)
		}
		var p map[string]json.RawMessage // exact keys: clients match them case-sensitively
		var meta map[string]json.RawMessage
		if json.Unmarshal(n.Params, &p) == nil && json.Unmarshal(p["_meta"], &meta) == nil && meta[metaSubscriptionID] != nil {
			t.Fatalf("the subscription id reached the client: %q", payload)
		}
	})
}
