package front2026

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/front"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// FuzzStatelessRequest: whatever params and headers a 2026-07-28 request
// carries, the decoder and validation (routing params, _meta, the
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers) and the
// tasks/update bounds never panic, and every refusal is a precise
// JSON-RPC error with HTTP 400.
func FuzzStatelessRequest(f *testing.F) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	for _, s := range []struct{ method, params, version, hm, hn string }{
		{"tools/call", `{"name":"echo",` + meta + `}`, "2026-07-28", "tools/call", "echo"},
		{"tasks/get", `{"taskId":"6f1c2a44-0000-4000-8000-000000000000",` + meta + `}`, "2026-07-28", "tasks/get", ""},
		{"tasks/update", `{"taskId":"t","inputResponses":{"1":{"action":"accept"}},` + meta + `}`, "2026-07-28", "tasks/update", "t"},
		{"tools/call", `{"name":5,"_meta":[]}`, "2099-01-01", "x", "=?base64?AAA?="},
		{"resources/read", `{"uri":"file:///a",` + meta + `}`, "", "resources/read", "=?base64?ZmlsZTovLy9h?="},
	} {
		f.Add(s.method, s.params, s.version, s.hm, s.hn)
	}
	fr := &Front{Deps: front.Deps{Up: &upstreamside.Side{}}}
	f.Fuzz(func(t *testing.T, method, params, version, hm, hn string) {
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": json.RawMessage(params)})
		if err != nil {
			return // params is not JSON: Parse's own fuzzing covers that
		}
		msg, perr := mcpwire.Parse(body)
		if perr != nil {
			return
		}
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		for k, v := range map[string]string{"Mcp-Protocol-Version": version, "Mcp-Method": hm, "Mcp-Name": hn} {
			if v != "" && utf8.ValidString(v) && !strings.ContainsAny(v, "\r\n") {
				r.Header.Set(k, v)
			}
		}
		_ = IsStateless(r, msg)
		mr, e := fr.validate(r, msg)
		if e != nil {
			switch e.Code {
			case mcpwire.CodeInvalidParams, mcpwire.CodeHeaderMismatch, mcpwire.CodeUnsupportedVersion:
			default:
				t.Fatalf("validate: code %d (%s)", e.Code, e.Message)
			}
			if e.Status != http.StatusBadRequest || e.Message == "" {
				t.Fatalf("validate: %+v, want HTTP 400 with a message", e)
			}
			return
		}
		if mr == nil || mr.Version != core.Version2026 {
			t.Fatalf("validated request %+v", mr)
		}
		var p struct {
			InputResponses json.RawMessage `json:"inputResponses"`
		}
		if json.Unmarshal(msg.Params, &p) == nil {
			answers, e := updateAnswers(p.InputResponses)
			if e == nil && len(answers) > core.MaxInputRequests {
				t.Fatalf("%d answers passed the bound", len(answers))
			}
		}
	})
}
