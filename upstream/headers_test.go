package upstream

import "testing"

func TestHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"us-west1":           "us-west1",
		"Hello, 世界":          "=?base64?SGVsbG8sIOS4lueVjA==?=",
		" padded ":           "=?base64?IHBhZGRlZCA=?=",
		"line1\nline2":       "=?base64?bGluZTEKbGluZTI=?=",
		"=?base64?literal?=": "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=",
		"get_weather":        "get_weather",
	} {
		if got := HeaderValue(in); got != want {
			t.Errorf("HeaderValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNameOf(t *testing.T) {
	if n, ok := nameOf("tools/call", []byte(`{"params":{"name":"x"}}`)); !ok || n != "x" {
		t.Errorf("tools/call: %q %v", n, ok)
	}
	if n, ok := nameOf("resources/read", []byte(`{"params":{"uri":"file:///a"}}`)); !ok || n != "file:///a" {
		t.Errorf("resources/read: %q %v", n, ok)
	}
	if _, ok := nameOf("tools/list", []byte(`{}`)); ok {
		t.Error("tools/list has no name")
	}
}
