package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestServeHelpGrouped: every serve flag names a category of flags.go's
// list; serve --help shows the categories in that order, each flag under
// its own, no line wider than helpWidth.
func TestServeHelpGrouped(t *testing.T) {
	cmd := serveCommand()
	for _, f := range cmd.Flags {
		if c := flagCategory(f); !slices.Contains(categories, c) {
			t.Errorf("serve flag --%s has category %q, want one of %q (flags.go)", f.Names()[0], c, categories)
		}
	}
	var out bytes.Buffer
	if err := run([]string{"taskgate", "serve", "--help"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	lines := strings.Split(help, "\n")
	last := -1
	current := ""
	for i, line := range lines {
		if len(line) > helpWidth {
			t.Errorf("line %d is %d wide: %q", i+1, len(line), line)
		}
		if k := slices.Index(categories, line); k >= 0 {
			if k < last {
				t.Errorf("category %q after %q", line, categories[last])
			}
			last, current = k, line
			continue
		}
		for _, f := range cmd.Flags {
			if strings.HasPrefix(line, "   --"+f.Names()[0]+" ") || line == "   --"+f.Names()[0] {
				if want := flagCategory(f); want != current {
					t.Errorf("--%s shown under %q, want %q", f.Names()[0], current, want)
				}
			}
		}
	}
	if last < 0 {
		t.Fatalf("no category in serve --help:\n%s", help)
	}
	// The two ways to name the upstream come first.
	if i, j := strings.Index(help, "--upstream URL"), strings.Index(help, "--upstream-command"); i < 0 || j < 0 || j > strings.Index(help, "Listening and TLS") {
		t.Errorf("--upstream and --upstream-command are not both in the first category:\n%s", help)
	}
}

// TestDidYouMean: a misspelt flag or command gets the likely one; a word
// far from every name gets none.
func TestDidYouMean(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--upstrem", "x"}, "unknown flag --upstrem: did you mean --upstream? (see taskgate serve --help)"},
		{[]string{"serve", "--redis-ulr", "x"}, "did you mean --redis-url?"},
		{[]string{"serve", "--max-inflght", "3"}, "did you mean --max-inflight?"},
		{[]string{"tools", "--upstrem", "x"}, "did you mean --upstream? (see taskgate tools --help)"},
		{[]string{"serve", "--zzzzzz"}, "unknown flag --zzzzzz (see taskgate serve --help)"},
		{[]string{"serv"}, `unknown command "serv": did you mean "serve"?`},
		{[]string{"helthcheck"}, `did you mean "healthcheck"?`},
		{[]string{"frobnicate"}, `unknown command "frobnicate" (see taskgate --help)`},
	} {
		err := run(append([]string{"taskgate"}, c.args...), &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("aaa bbb ccc dddddddddddd e", 2, 10)
	if want := "  aaa bbb\n  ccc\n  dddddddddddd\n  e"; got != want {
		t.Errorf("wrap = %q, want %q", got, want)
	}
}

// TestFlagsDocumented: every flag of every command is named (as
// "`--name") in README.md or a page under docs/, so the reference that
// moved out of the README stays whole.
func TestFlagsDocumented(t *testing.T) {
	var docs strings.Builder
	pages, _ := filepath.Glob("../../docs/*.md")
	for _, p := range append(pages, "../../README.md") {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	for _, cmd := range []*cli.Command{serveCommand(), toolsCommand(), callCommand(), healthcheckCommand()} {
		for _, f := range cmd.Flags {
			if name := f.Names()[0]; !strings.Contains(docs.String(), "`--"+name) {
				t.Errorf("taskgate %s --%s is in no page of docs/ nor in README.md", cmd.Name, name)
			}
		}
	}
}

// TestEveryCommandHelpWrapped: every command with flags has serve's
// layout (FLAGS, categories, --help last) wrapped to helpWidth, and says
// which flags have no TASKGATE_<FLAG> variable or another one.
func TestEveryCommandHelpWrapped(t *testing.T) {
	for _, name := range []string{"serve", "tools", "healthcheck", "call"} {
		var out bytes.Buffer
		if err := run([]string{"taskgate", name, "--help"}, &out, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		help := out.String()
		for i, line := range strings.Split(help, "\n") {
			if len(line) > helpWidth {
				t.Errorf("%s --help line %d is %d wide: %q", name, i+1, len(line), line)
			}
		}
		if !strings.Contains(help, "\nFLAGS:\n") || !strings.HasSuffix(help, "--help, -h                     show help\n") {
			t.Errorf("%s --help is not laid out as serve's:\n%s", name, help)
		}
	}
	var out bytes.Buffer
	if err := run([]string{"taskgate", "tools", "--help"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nUpstream\n   --upstream URL", "\nStore\n   --redis-url URL", "print JSON instead of a table (no environment\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tools --help lacks %q", want)
		}
	}
	out.Reset()
	if err := run([]string{"taskgate", "healthcheck", "--help"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "TASKGATE_HEALTHCHECK_URL") {
		t.Errorf("healthcheck --help does not name TASKGATE_HEALTHCHECK_URL:\n%s", out.String())
	}
}
