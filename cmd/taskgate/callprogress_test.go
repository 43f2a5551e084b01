package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// callOnPTY runs taskgate call with stderr on a pseudo-terminal and
// returns stdout, what the terminal got, and the error.
func callOnPTY(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 200}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, ptmx) // ends with EIO once the terminal side is closed
		got <- b.String()
	}()
	var out bytes.Buffer
	err = run(append([]string{"taskgate", "call"}, args...), &out, tty)
	_ = tty.Close()
	return out.String(), <-got, err
}

// TestCallProgressOnTerminal: on a terminal, taskgate call --task draws
// one live line, rewritten in place (\r, then erase to end of line), with
// the elapsed time and the status, and a bar once the tool reports
// progress with a total; the line is ended with a newline and the result
// goes to stdout.
func TestCallProgressOnTerminal(t *testing.T) {
	url := startGateway(t, "/mcp", "progress") + "/mcp"
	out, term, err := callOnPTY(t, url, "progress", "steps=4", "delayMs=200", "--task")
	if err != nil {
		t.Fatalf("call: %v\nterminal: %q", err, term)
	}
	if out != "done 4\n" {
		t.Errorf("stdout %q, want %q", out, "done 4\n")
	}
	term = strings.ReplaceAll(term, "\r\n", "\n") // the terminal's ONLCR
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\r\d+s task [^:\s]+: working\x1b\[K`),
		regexp.MustCompile(`\r\d+s task [^:\s]+: working \[#{10}\.{10}\] 2/4 step 2/4\x1b\[K`),
		regexp.MustCompile(`\r\d+s task [^:\s]+: completed \[#{20}\] 4/4 step 4/4\x1b\[K\n`),
	} {
		if !want.MatchString(term) {
			t.Errorf("terminal output %q lacks %s", term, want)
		}
	}
	if n := strings.Count(term, "\n"); n != 2 { // the session line and the finished live line
		t.Errorf("terminal output has %d lines, want 2: %q", n, term)
	}
}

// TestCallProgressOnPipe: on a pipe the status changes stay plain lines,
// with no control characters.
func TestCallProgressOnPipe(t *testing.T) {
	url := startGateway(t, "/mcp", "progress") + "/mcp"
	var out, errOut bytes.Buffer
	err := run([]string{"taskgate", "call", url, "progress", "steps=2", "--task"}, &out, &errOut)
	if err != nil || out.String() != "done 2\n" {
		t.Fatalf("call: %v, stdout %q", err, out.String())
	}
	if s := errOut.String(); strings.ContainsAny(s, "\r\x1b") || !regexp.MustCompile(`\ntask [^:\s]+: completed\n$`).MatchString(s) {
		t.Errorf("stderr %q: want plain lines ending in the completed status", s)
	}
}

// TestLiveLineText: the elapsed time, the bar's clamping, and clipping
// to the terminal's width.
func TestLiveLineText(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{elapsed(0), "0s"}, {elapsed(65e9), "1m05s"}, {elapsed(3723e9), "1h02m03s"},
		{bar(0.5), "[##########..........]"}, {bar(2), "[####################]"}, {bar(-1), "[....................]"},
		{num(3), "3"}, {num(2.5), "2.5"},
		{clipCols("abcdef", 5), "abc…"}, {clipCols("abcd", 5), "abcd"}, {clipCols("abcdef", 0), "abcdef"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
