package core

import (
	"testing"
	"unicode/utf8"

	"github.com/taskgate/taskgate/upstream"
)

// FuzzDecodeHeaderValue: the =?base64?…?= decoding of Mcp-Name and
// Mcp-Param-* never panics, and round-trips what the encoder produces.
func FuzzDecodeHeaderValue(f *testing.F) {
	for _, s := range []string{"us-west1", "=?base64?SGVsbG8=?=", "=?base64?", "=?base64?!!?=", " padded ", "Hello, 世界"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = DecodeHeaderValue(s)
		if !utf8.ValidString(s) {
			return // header values carry UTF-8 text; the decoder refuses the rest
		}
		enc := upstream.HeaderValue(s)
		got, ok := DecodeHeaderValue(enc)
		if !ok || got != s {
			t.Fatalf("round trip of %q: encoded %q, decoded %q (ok=%v)", s, enc, got, ok)
		}
	})
}

func TestDecodeHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"echo":                                "echo",
		"=?base64?SGVsbG8sIOS4lueVjA==?=":     "Hello, 世界",
		"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=": "=?base64?literal?=",
		"=?base64?no-suffix":                  "=?base64?no-suffix",
		"Hello, 世界":                           "Hello, 世界", // raw UTF-8, as go-sdk v1.8.0 sends it
	} {
		if got, ok := DecodeHeaderValue(in); !ok || got != want {
			t.Errorf("decode(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"=?base64?!!!?=", "=?base64?/w==?=", "a\x01b"} {
		if _, ok := DecodeHeaderValue(in); ok {
			t.Errorf("decode(%q) accepted", in)
		}
	}
}
