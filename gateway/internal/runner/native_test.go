package runner

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestViaUpstreamTask(t *testing.T) {
	for params, want := range map[string]bool{
		`{"name":"x","task":{}}`:              true,
		`{"name":"x","task":{"ttl":1000}}`:    true,
		`{"name":"x","task":null}`:            false,
		`{"name":"x"}`:                        false,
		`{"name":"x","arguments":{"task":1}}`: false,
	} {
		if got := viaUpstreamTask(&jsonrpc.Request{Method: "tools/call", Params: json.RawMessage(params)}); got != want {
			t.Errorf("%s: %v, want %v", params, got, want)
		}
	}
	if viaUpstreamTask(&jsonrpc.Request{Method: "tasks/get", Params: json.RawMessage(`{"task":{}}`)}) {
		t.Error("a tasks/get is not a task-augmented call")
	}
	p, err := WithUpstreamTask(json.RawMessage(`{"name":"x"}`), 90_000_000_000)
	if err != nil || !strings.Contains(string(p), `"task":{"ttl":90000}`) {
		t.Errorf("withUpstreamTask = %s, %v", p, err)
	}
}

func TestWithoutRelatedTask(t *testing.T) {
	for in, want := range map[string]string{
		`{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"u1"}}}`:       `{"content":[]}`,
		`{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"u1"},"k":1}}`: `{"_meta":{"k":1},"content":[]}`,
		`{"content":[]}`: `{"content":[]}`,
		`{"content":[],"_meta":"io.modelcontextprotocol/related-task"}`: `{"content":[],"_meta":"io.modelcontextprotocol/related-task"}`,
	} {
		if got := string(WithoutRelatedTask(json.RawMessage(in))); got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
}
