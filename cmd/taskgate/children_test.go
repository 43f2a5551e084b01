package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestChildrenFlagErrors: --upstream-warm, --upstream-scope and the
// children's budget are checked at start, each error one line naming the flag.
func TestChildrenFlagErrors(t *testing.T) {
	cmd := "--upstream-command=cat"
	up := "--upstream=http://127.0.0.1:1/mcp"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", cmd, "--upstream-warm", "-1"}, "invalid --upstream-warm -1: it must be a number of processes, or 0 for none"},
		{[]string{"serve", cmd, "--upstream-warm", "21"}, "invalid --upstream-warm 21: at most --max-sessions (20)"},
		{[]string{"serve", cmd, "--upstream-warm", "3", "--max-sessions", "2"}, "invalid --upstream-warm 3: at most --max-sessions (2)"},
		{[]string{"serve", cmd, "--upstream-warm", "2", "--upstream-shared"}, "--upstream-warm goes with a process per client session, not --upstream-shared"},
		{[]string{"serve", up, "--upstream-warm", "1"}, "--upstream-warm goes with --upstream-command"},
		{[]string{"serve", cmd, "--upstream-warm", "2", "--upstream-scope", "shared"}, "--upstream-warm goes with a process per client session, not --upstream-shared"},
		{[]string{"serve", cmd, "--upstream-scope", "user"}, `invalid --upstream-scope "user": want session, principal or shared`},
		{[]string{"serve", cmd, "--upstream-scope", "principal"}, "--upstream-scope principal needs sign-in (--auth-issuer or --auth-introspection-url)"},
		{[]string{"serve", cmd, "--upstream-scope", "principal", "--upstream-shared"}, "--upstream-shared=true and --upstream-scope principal disagree"},
		{[]string{"serve", cmd, "--upstream-scope", "shared", "--upstream-shared=false"}, "--upstream-shared=false and --upstream-scope shared disagree"},
		{[]string{"serve", up, "--upstream-scope", "principal"}, "--upstream-scope goes with --upstream-command"},
		{[]string{"serve", cmd, "--upstream-memory-limit", "lots"}, `invalid --upstream-memory-limit "lots": want a byte size`},
		{[]string{"serve", cmd, "--upstream-memory-limit", "512KiB"}, `invalid --upstream-memory-limit "512KiB": at least 1MiB`},
		{[]string{"serve", cmd, "--upstream-memory-total", "100KiB"}, `invalid --upstream-memory-total "100KiB": at least 1MiB`},
		{[]string{"serve", cmd, "--upstream-memory-limit", "2GiB", "--upstream-memory-total", "1GiB"}, `invalid --upstream-memory-limit "2GiB": over --upstream-memory-total "1GiB"`},
		{[]string{"serve", cmd, "--upstream-cpu-limit", "half"}, `invalid --upstream-cpu-limit "half": want a positive number of cores`},
		{[]string{"serve", cmd, "--upstream-cpu-limit", "-1"}, `invalid --upstream-cpu-limit "-1"`},
		{[]string{"serve", cmd, "--upstream-cpu-limit", "NaN"}, `invalid --upstream-cpu-limit "NaN"`},
		{[]string{"serve", cmd, "--upstream-open-files", "3"}, "invalid --upstream-open-files 3: at least 8"},
		{[]string{"serve", up, "--upstream-memory-limit", "256MiB"}, "--upstream-memory-limit goes with --upstream-command"},
		{[]string{"serve", up, "--upstream-open-files", "64"}, "--upstream-open-files goes with --upstream-command"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		err := run(append([]string{"taskgate"}, tt.args...), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line containing %q", tt.args, err, tt.want)
		}
	}
}
