package mcpwire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzScanEnvelope: wherever the fast path answers, it fills the envelope
// exactly as json.Unmarshal does.
func FuzzScanEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\"}"}}}`,
		`{"jsonrpc":"2.0","id":"x","result":{}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}`,
		`{ "id" : 1 , "method" : "a" , "x" : [1,{"y":"]"}] , "jsonrpc" : "2.0" }`,
		`{"Method":"a","jsonrpc":"2.0"}`,
		`{"method":"a","method":"b"}`,
		`{"method":"\u0061"}`,
		`{"method":null}`,
		`{"jsonrpc":2}`,
		`{"ſd":1}`,
		`{}`,
		`{"a":{}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		if len(b) == 0 || b[0] != '{' {
			return
		}
		var fast Message
		if !scanEnvelope(b, &fast) {
			return
		}
		var slow Message
		if err := json.Unmarshal(b, &slow); err != nil {
			t.Fatalf("fast path accepted what json.Unmarshal refuses (%v): %q", err, s)
		}
		same := func(a, b json.RawMessage) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }
		if !same(fast.ID, slow.ID) || !same(fast.Params, slow.Params) || !same(fast.Result, slow.Result) ||
			!same(fast.Error, slow.Error) || fast.Version != slow.Version ||
			(fast.Method == nil) != (slow.Method == nil) || fast.Method != nil && *fast.Method != *slow.Method {
			t.Fatalf("%q:\nfast %+v method %v\nslow %+v method %v", s, fast, fast.Method, slow, slow.Method)
		}
	})
}

// BenchmarkParse: the envelope of a small tools/call.
func BenchmarkParse(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"progressToken":"p-1"}}}`)
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if _, err := Parse(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflect", func(b *testing.B) {
		for b.Loop() {
			var m Message
			if err := json.Unmarshal(body, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
