package stdio

import (
	"encoding/json"
	"testing"
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
