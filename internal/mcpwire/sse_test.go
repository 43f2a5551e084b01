package mcpwire

import (
	"io"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	in := ": keep-alive\r\n\r\n" +
		"id: 1\r\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n" +
		"retry: 100\n\n" + // no data: skipped
		"data:no-space\n\n" +
		"data: " + strings.Repeat("x", 40<<10) + "\n\n" +
		"data: tail-without-blank-line"
	r := NewReader(strings.NewReader(in), 64<<20)
	want := []Event{
		{ID: "1", Name: "message", Data: []byte("{\"a\":\n1}")},
		{Data: []byte("no-space")},
		{Data: []byte(strings.Repeat("x", 40<<10))},
	}
	for i, w := range want {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.ID != w.ID || ev.Name != w.Name || string(ev.Data) != string(w.Data) {
			t.Errorf("event %d = %+v, want %+v", i, ev, w)
		}
	}
	if _, err := r.Next(); err != io.ErrUnexpectedEOF {
		t.Errorf("unterminated last event: err = %v, want io.ErrUnexpectedEOF", err)
	}
}

func FuzzSSEReader(f *testing.F) {
	f.Add("data: {}\n\n")
	f.Add("id: 1\r\ndata: a\r\ndata: b\r\n\r\n: c\n")
	f.Fuzz(func(t *testing.T, s string) {
		r := NewReader(strings.NewReader(s), 64<<20)
		for i := 0; i < 1000; i++ {
			if _, err := r.Next(); err != nil {
				return
			}
		}
	})
}
