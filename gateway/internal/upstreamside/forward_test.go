package upstreamside

import (
	"encoding/json"
	"testing"

	"github.com/taskgate/taskgate/gateway/internal/core"
)

func Test2026ParamsTranslation(t *testing.T) {
	in := json.RawMessage(`{"name":"echo","arguments":{"text":"x"},"_meta":{"progressToken":"p1",` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{},"x.y/z":{}}},` +
		`"io.modelcontextprotocol/logLevel":"info"}}`)
	legacy := ParamsFor(in, &Target{})
	if want := `{"_meta":{"progressToken":"p1"},"arguments":{"text":"x"},"name":"echo"}`; string(legacy) != want {
		t.Errorf("legacy params = %s\nwant %s", legacy, want)
	}
	if got := SessionParams(json.RawMessage(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`)); string(got) != `{}` {
		t.Errorf("legacy params of _meta only = %s, want {}", got)
	}
	modern := ParamsFor(in, &Target{Stateless: true})
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(modern, &p)
	if string(p.Meta[core.MetaClientCaps]) != `{"extensions":{"x.y/z":{}},"sampling":{}}` || string(p.Meta[core.MetaProtocolVersion]) != `"2026-07-28"` {
		t.Errorf("modern params _meta = %v", p.Meta)
	}
	if got := core.StatelessResult("tools/list", json.RawMessage(`{"tools":[]}`)); string(got) != `{"cacheScope":"private","resultType":"complete","tools":[],"ttlMs":0}` {
		t.Errorf("core.StatelessResult(tools/list) = %s", got)
	}
	if got := core.StatelessResult("tools/call", json.RawMessage(`{"content":[],"resultType":"input_required"}`)); string(got) != `{"content":[],"resultType":"input_required"}` {
		t.Errorf("core.StatelessResult kept resultType? %s", got)
	}
}
