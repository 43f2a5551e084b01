package front2026

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

func TestIsModern(t *testing.T) {
	meta := `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`
	for _, tc := range []struct {
		name            string
		kind            mcpwire.Kind
		method, params  string
		session, header string
		want            bool
	}{
		{"_meta version", mcpwire.KindRequest, "tools/list", meta, "", "", true},
		{"_meta version on a session", mcpwire.KindRequest, "tools/list", meta, "s1", "2025-11-25", true},
		{"_meta version, unknown value", mcpwire.KindRequest, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01"}}`, "", "", true},
		{"modern header, no _meta", mcpwire.KindRequest, "tools/list", `{}`, "", "2026-07-28", true},
		{"newer header", mcpwire.KindNotification, "notifications/x", ``, "", "2027-01-01", true},
		{"modern header on a session", mcpwire.KindRequest, "tools/list", `{}`, "s1", "2026-07-28", false},
		{"initialize with modern header", mcpwire.KindRequest, "initialize", `{"protocolVersion":"2026-07-28"}`, "", "2026-07-28", false},
		{"initialize with modern _meta", mcpwire.KindRequest, "initialize", meta, "", "", true},
		{"legacy header", mcpwire.KindRequest, "tools/list", `{}`, "s1", "2025-11-25", false},
		{"no header", mcpwire.KindRequest, "tools/list", `{}`, "", "", false},
		{"key in arguments only", mcpwire.KindRequest, "tools/call", `{"arguments":{"io.modelcontextprotocol/protocolVersion":"x"}}`, "", "", false},
		{"response", mcpwire.KindResponse, "", ``, "", "2026-07-28", false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if tc.session != "" {
			r.Header.Set("Mcp-Session-Id", tc.session)
		}
		if tc.header != "" {
			r.Header.Set("Mcp-Protocol-Version", tc.header)
		}
		m := &mcpwire.Message{Kind: tc.kind, Params: json.RawMessage(tc.params)}
		if tc.method != "" {
			m.Method = &tc.method
		}
		if got := IsStateless(r, m); got != tc.want {
			t.Errorf("%s: isModern = %v, want %v", tc.name, got, tc.want)
		}
	}
}
