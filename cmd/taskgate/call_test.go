package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestCallArgs: flags anywhere among the arguments; a value that parses
// as JSON is sent as JSON, any other as a string; bad input says how to
// fix it.
func TestCallArgs(t *testing.T) {
	o, help, err := callArgs([]string{"http://127.0.0.1:8080/mcp", "--task", "slow", "seconds=3", "text=hi there",
		"--header", "Authorization: Bearer x", "tags=[\"a\"]", "quoted=\"3\"", "--timeout=1m"})
	if err != nil || help {
		t.Fatalf("callArgs: %v %v", err, help)
	}
	want := map[string]any{"seconds": 3.0, "text": "hi there", "tags": []any{"a"}, "quoted": "3"}
	if o.url != "http://127.0.0.1:8080/mcp" || o.tool != "slow" || !o.task || o.timeout != time.Minute ||
		o.header.Get("Authorization") != "Bearer x" || !reflect.DeepEqual(o.args, want) {
		t.Errorf("callArgs = %+v", o)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"http://h/mcp"}, "want the gateway's MCP URL and a tool name"},
		{[]string{"127.0.0.1:8080/mcp", "echo"}, "did you mean http://127.0.0.1:8080/mcp?"},
		{[]string{"http://h/mcp", "echo", "novalue"}, `invalid argument "novalue": want key=value`},
		{[]string{"http://h/mcp", "echo", "--tsk"}, "unknown flag --tsk: did you mean --task?"},
		{[]string{"http://h/mcp", "echo", "--header", "nocolon"}, `invalid --header "nocolon"`},
		{[]string{"http://h/mcp", "echo", "--timeout", "0s"}, "invalid --timeout 0s"},
	} {
		if _, _, err := callArgs(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("callArgs(%q) = %v, want %q", c.args, err, c.want)
		}
	}
	if _, help, _ := callArgs([]string{"--help"}); !help {
		t.Error("--help not seen")
	}
}

// FuzzCallArgs: any command line gets options or a one-line error, never
// a panic; a parsed one has a URL and a tool.
func FuzzCallArgs(f *testing.F) {
	for _, seed := range []string{
		"http://127.0.0.1:8080/mcp slow seconds=3 --task",
		"--header 'A: b' http://h/mcp t x={\"a\":[1]} --timeout=1s",
		"127.0.0.1:8080/mcp echo text=",
		"--tsk http://h/mcp",
		"http://h/mcp t =v",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		o, help, err := callArgs(strings.Fields(line))
		switch {
		case err != nil:
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
		case !help && (o.url == "" || o.tool == "" || o.timeout <= 0):
			t.Errorf("callArgs(%q) = %+v without an error", line, o)
		}
	})
}
