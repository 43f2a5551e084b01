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

// chunks is a source that returns its chunks one per Read, then io.EOF.
type chunks []string

func (c *chunks) Read(p []byte) (int, error) {
	if len(*c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*c)[0])
	if n == len((*c)[0]) {
		*c = (*c)[1:]
	} else {
		(*c)[0] = (*c)[0][n:]
	}
	return n, nil
}

// TestSSEReaderYieldRelease: with Yield, Next stops at a blank line when
// nothing more is buffered (a keep-alive comment included) with an empty
// event; Release then gives the buffer back, and Next reads on from the
// source as if it had been kept.
func TestSSEReaderYieldRelease(t *testing.T) {
	src := chunks{"data: 1\n\n", ": keep-alive\n\n", "data: 2\n\ndata: 3\n\n", "data: 4", "\n\n"}
	r := NewReader(&src, 1<<20)
	r.Yield = true
	var got []string
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Data == nil {
			if r.Buffered() != 0 {
				t.Fatalf("an empty event with %d bytes buffered", r.Buffered())
			}
			got = append(got, "-")
			r.Release()
			if r.Buffered() != 0 {
				t.Fatal("released, yet bytes buffered")
			}
			continue
		}
		got = append(got, string(ev.Data))
	}
	// An event is returned as ever; the keep-alive, with nothing behind
	// it, stops Next; "4" spans two reads.
	if want := "1 - 2 3 4"; strings.Join(got, " ") != want {
		t.Errorf("events %q, want %q", strings.Join(got, " "), want)
	}
}
