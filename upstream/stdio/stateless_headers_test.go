package stdio

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/taskgate/taskgate/upstream"
)

// FuzzParamHeader: a header value never panics the decoder, and what the
// upstream client's encoder makes of a string argument decodes back to it
// and matches it; annotations are read from any schema without a panic.
func FuzzParamHeader(f *testing.F) {
	for _, s := range []string{"us-west1", "Hello, 世界", " padded ", "line1\nline2", "=?base64?literal?=", "", "42", "true"} {
		f.Add(s, `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"properties":{"c":{"x-mcp-header":"C"}}}}}`)
	}
	f.Add("=?base64?SGVsbG8?=", `{"properties":{"x":{"x-mcp-header":7}}}`)
	f.Add("=?base64?SGVs!!!bG8=?=", `[]`)
	f.Fuzz(func(t *testing.T, s, schema string) {
		_, _ = decodeParam(s)
		arg, _ := json.Marshal(s)
		_ = sameValue(s, arg)
		hs := headerAnnotations(json.RawMessage(schema), nil, nil)
		for _, h := range hs {
			_, _ = argumentAt(map[string]json.RawMessage{"a": arg}, h.path)
		}
		if !utf8.ValidString(s) {
			return
		}
		enc := upstream.HeaderValue(s)
		got, err := decodeParam(enc)
		if err != nil || got != s || !sameValue(got, arg) {
			t.Fatalf("%q encoded as %q decodes to %q, %v", s, enc, got, err)
		}
	})
}

// checkParamHeaders against a fixed annotation set, without a child.
func TestParamHeaderRules(t *testing.T) {
	hs := headerAnnotations(json.RawMessage(`{"properties":{"region":{"type":"string","x-mcp-header":"Region"},
		"n":{"type":"integer","x-mcp-header":"N"},"flag":{"type":"boolean","x-mcp-header":"Flag"},
		"deep":{"properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}}}}`), nil, nil)
	if len(hs) != 4 {
		t.Fatalf("annotations: %+v, want 4", hs)
	}
	for _, tc := range []struct {
		header, arg string
		ok          bool
	}{
		{"us", `"us"`, true}, {"42", `42`, true}, {"42.0", `42`, true}, {"43", `42`, false}, {"true", `true`, true},
		{"True", `true`, false}, {"1.5", `1.5`, false}, {"x", `{"a":1}`, false}, {"=?base64?dXM=?=", `"us"`, true},
	} {
		v, err := decodeParam(tc.header)
		if ok := err == nil && sameValue(v, json.RawMessage(tc.arg)); ok != tc.ok {
			t.Errorf("header %q vs %s: %v, want %v", tc.header, tc.arg, ok, tc.ok)
		}
	}
	if v, ok := argumentAt(map[string]json.RawMessage{"deep": json.RawMessage(`{"zone":"z1"}`)}, []string{"deep", "zone"}); !ok || string(v) != `"z1"` {
		t.Errorf("deep argument: %s %v", v, ok)
	}
	for _, bad := range []string{"a\x01b", "caf\xc3\xa9"} {
		if _, err := decodeParam(bad); err == nil {
			t.Errorf("%q accepted as a plain header value", bad)
		}
	}
}

// TestStatelessUnknownToolListsOnce: a complete tools/list is
// authoritative: calls naming a tool not in it do not list the tools
// again each (under the lock every client's calls wait on), until the
// child says its tools changed.
func TestStatelessUnknownToolListsOnce(t *testing.T) {
	b := startStatelessBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func(name string) {
		t.Helper()
		a := answer(t, post2026(t, ctx, b, "tools/call", map[string]any{"name": name, "arguments": map[string]any{}}, map[string]string{"Mcp-Name": name}))
		if a.Error == nil && name == "no_such_tool" {
			t.Fatalf("%s: %s, want an error", name, a.Result)
		}
	}
	// Every request to the child (calls and the bridge's own listings)
	// takes a bridge id.
	before := b.calls.Made()
	for range 3 {
		call("no_such_tool")
	}
	if n := b.calls.Made() - before; n != 4 {
		t.Fatalf("3 calls of an unknown tool sent %d requests to the child; want 4 (one tools/list)", n)
	}
	b.st.tools.forget() // what notifications/tools/list_changed does
	before = b.calls.Made()
	call("no_such_tool")
	if n := b.calls.Made() - before; n != 2 {
		t.Fatalf("a call after the tools changed sent %d requests; want 2 (the listing again)", n)
	}
}

// failingListServer is a 2026-07-28 server over stdio whose tools/list
// fails, and whose tools/call would succeed.
const failingListServer = `while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\("[^"]*"\|[0-9][0-9]*\).*/\1/p')
  case "$line" in
  *'"server/discover"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"nolist","version":"1"}}}\n' "$id" ;;
  *'"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"no listing today"}}\n' "$id" ;;
  *'"tools/call"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"unchecked"}]}}\n' "$id" ;;
  esac
done`

// TestStatelessParamHeadersFailClosed: when the tools' annotations cannot
// be read, a call's Mcp-Param headers cannot be checked, and the call is
// refused with a precise error rather than passed on unchecked.
func TestStatelessParamHeadersFailClosed(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) { o.Command = []string{"/bin/sh", "-c", failingListServer} })
	if b.st == nil {
		t.Fatal("the script is not served statelessly")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := post2026(t, ctx, b, "tools/call", map[string]any{"name": "t", "arguments": map[string]any{"region": "us"}},
		map[string]string{"Mcp-Name": "t", "Mcp-Param-Region": "eu"})
	a := answer(t, resp)
	if resp.StatusCode != http.StatusBadGateway || a.Error == nil || a.Error.Code != -32603 ||
		!strings.Contains(a.Error.Message, "cannot check the Mcp-Param headers") || !strings.Contains(a.Error.Message, "no listing today") {
		t.Fatalf("a call whose headers cannot be checked: %d %s %+v; want 502 -32603 naming why", resp.StatusCode, a.Result, a.Error)
	}
}

// TestExitedDataIsUpstreams: the bridge marks a call its child exited
// under with the very bytes upstream.TransientAnswer looks for.
func TestExitedDataIsUpstreams(t *testing.T) {
	if string(exitedData) != string(upstream.ExitedData) {
		t.Fatalf("stdio marks %s, upstream reads %s", exitedData, upstream.ExitedData)
	}
}
