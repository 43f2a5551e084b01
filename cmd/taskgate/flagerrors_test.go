package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestFlagValueErrors: a flag missing its value is named, not the word
// after the flag that took its place; a number or duration that does not
// parse says what is wanted; --console-listen with a bare port is told
// the HOST:PORT, as --listen is.
func TestFlagValueErrors(t *testing.T) {
	up := "--upstream=http://127.0.0.1:1/mcp"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--upstream", "--task", "slow"}, "--upstream needs a value; got the flag --task (see taskgate serve --help)"},
		{[]string{"serve", up, "--listen", "--task", "slow"}, "--listen needs a value; got the flag --task (see taskgate serve --help)"},
		{[]string{"serve", "-upstream", "-task", "slow"}, "--upstream needs a value; got the flag --task (see taskgate serve --help)"},
		{[]string{"tools", "--header", "--json"}, "--header needs a value; got the flag --json (see taskgate tools --help)"},
		{[]string{"call", "http://127.0.0.1:1/mcp", "echo", "--header", "--task"}, "--header needs a value; got the flag --task (see taskgate call --help)"},
		{[]string{"serve", "--listen=127.0.0.1:0", "--upstream"}, "--upstream needs a value (see taskgate serve --help)"},
		{[]string{"serve", "--listen=127.0.0.1:0", up, "--max-inflight", "lots"}, `--max-inflight wants a whole number, got "lots"`},
		{[]string{"serve", "--listen=127.0.0.1:0", up, "--max-task-rate", "many"}, `--max-task-rate wants a number such as 10 or 0.5, got "many"`},
		{[]string{"serve", "--listen=127.0.0.1:0", up, "--lease", "long"}, `--lease wants a duration such as 500ms, 30s or 2m, got "long"`},
		{[]string{"healthcheck", "--timeout", "3"}, `--timeout wants a duration such as 500ms, 30s or 2m, got "3"`},
		{[]string{"serve", "--listen=127.0.0.1:0", up, "--console-listen", "9091"}, "invalid --console-listen 9091: want HOST:PORT, e.g. 127.0.0.1:9091 (or :9091 for every interface)"},
	} {
		var out, errOut bytes.Buffer
		err := run(append([]string{"taskgate"}, tt.args...), &out, &errOut)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: error %v, want %q", tt.args, err, tt.want)
		}
		if strings.Contains(out.String()+errOut.String(), "USAGE") {
			t.Errorf("%q: printed the help text", tt.args)
		}
	}
}

// TestFlagValueNotAFlag: a value that starts with "-" but names no flag of
// the command is a value (a negative number, a header), not a missing one.
func TestFlagValueNotAFlag(t *testing.T) {
	err := run([]string{"taskgate", "serve", "--listen=127.0.0.1:0", "--upstream=http://127.0.0.1:1/mcp", "--poll-limit", "-1"},
		&bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "invalid --poll-limit -1") {
		t.Fatalf("error %v, want the flag's own check of -1", err)
	}
}

// TestBadEnvValue: a number in the environment that does not parse names
// the flag, what it wants and the variable.
func TestBadEnvValue(t *testing.T) {
	t.Setenv("TASKGATE_MAX_INFLIGHT", "lots")
	err := run([]string{"taskgate", "serve", "--listen=127.0.0.1:0", "--upstream=http://127.0.0.1:1/mcp"}, &bytes.Buffer{}, &bytes.Buffer{})
	want := `--max-inflight wants a whole number, got "lots" (the environment's TASKGATE_MAX_INFLIGHT)`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// TestHelpCommand: `taskgate help` prints what --help prints, and
// `taskgate help serve` what serve --help does.
func TestHelpCommand(t *testing.T) {
	for _, pair := range [][2][]string{
		{{"taskgate", "help"}, {"taskgate", "--help"}},
		{{"taskgate", "help", "serve"}, {"taskgate", "serve", "--help"}},
		{{"taskgate", "help", "tools"}, {"taskgate", "tools", "--help"}},
	} {
		var got, want bytes.Buffer
		if err := run(pair[0], &got, &bytes.Buffer{}); err != nil {
			t.Fatalf("%q: %v", pair[0], err)
		}
		if err := run(pair[1], &want, &bytes.Buffer{}); err != nil {
			t.Fatalf("%q: %v", pair[1], err)
		}
		if got.String() != want.String() || got.Len() == 0 {
			t.Errorf("%q printed %d bytes, not the %d of %q", pair[0], got.Len(), want.Len(), pair[1])
		}
	}
	err := run([]string{"taskgate", "help", "serv"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || err.Error() != `no command "serv" to help with: did you mean "serve"? (see taskgate --help)` {
		t.Errorf("help serv: %v", err)
	}
}
