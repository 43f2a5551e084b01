package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestFlagsDocUpToDate: docs/flags.md's tables are what the flag
// definitions generate, so a flag added, renamed or reworded without the
// docs fails here.
func TestFlagsDocUpToDate(t *testing.T) {
	doc, err := os.ReadFile("../../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := spliceFlagsDoc(string(doc), flagsMarkdown())
	if err != nil {
		t.Fatal(err)
	}
	if want != string(doc) {
		t.Errorf("docs/flags.md differs from the flag definitions; regenerate it with\n\tgo run ./cmd/taskgate flags --markdown docs/flags.md\n%s", firstDiff(string(doc), want))
	}
}

// TestFlagsDocListsEveryFlag: the generated tables name every flag of
// serve, tools, call and healthcheck, so a generator that dropped some
// would not pass the test above by matching a doc that lacks them too.
func TestFlagsDocListsEveryFlag(t *testing.T) {
	gen := flagsMarkdown()
	for _, cmd := range []*cli.Command{serveCommand(), toolsCommand(), callCommand(), healthcheckCommand()} {
		for _, f := range cmd.Flags {
			if !strings.Contains(gen, "`--"+f.Names()[0]) {
				t.Errorf("%s --%s is not in the generated tables", cmd.Name, f.Names()[0])
			}
		}
	}
	for _, name := range []string{"auth-issuer", "public-url", "trusted-proxies", "upstream-per-session"} {
		if !strings.Contains(gen, "`--"+name) {
			t.Errorf("--%s is missing", name)
		}
	}
}

// TestFlagsCommand: the hidden command prints the tables, and rewrites
// only the part of a file between the markers.
func TestFlagsCommand(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"taskgate", "flags", "--markdown"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if out.String() != flagsMarkdown() {
		t.Errorf("flags --markdown printed %d bytes, want the %d of flagsMarkdown", out.Len(), len(flagsMarkdown()))
	}
	path := t.TempDir() + "/flags.md"
	doc := "intro\n" + flagsDocBegin + "\nstale\n" + flagsDocEnd + "\noutro\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"taskgate", "flags", "--markdown", path}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "intro\n" + flagsDocBegin + "\n" + flagsMarkdown() + flagsDocEnd + "\noutro\n"
	if string(got) != want {
		t.Errorf("rewritten file:\n%s", firstDiff(string(got), want))
	}
	if _, err := spliceFlagsDoc("no markers", "x"); err == nil {
		t.Error("a file without markers was accepted")
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n\thave: " + gl + "\n\twant: " + wl
		}
	}
	return ""
}
