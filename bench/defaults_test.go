package main

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestReadDefaults reads the defaults the capacity projection needs from
// this checkout's own serve --help, so a change to how help is laid out
// (it wraps at 80 columns, even inside "(default: …)") fails here rather
// than in a long capacity run.
func TestReadDefaults(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "taskgate")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/taskgate").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	d, err := readDefaults(bin)
	if err != nil {
		t.Fatal(err)
	}
	if d.lease <= 0 || d.renew <= 0 || d.renew >= d.lease || d.ttl <= 0 || d.maxTTL < d.ttl || d.grace <= 0 || d.maxInflight <= 0 {
		t.Fatalf("implausible defaults from serve --help: %+v", d)
	}
}

// TestHelpEntries joins a flag's wrapped lines and ends an entry at a
// category heading.
func TestHelpEntries(t *testing.T) {
	help := "Tasks and limits\n" +
		"   --poll-limit N                 most tasks/get per second (default:\n" +
		"                                  10)\n" +
		"   --lease DURATION               fails its tasks this long (plus a 2s\n" +
		"                                  grace) (default: 15s)\n" +
		"Logging\n" +
		"   --log-level LEVEL              debug, info (default: info)\n"
	got := helpEntries(help)
	want := map[string]string{
		"poll-limit": "--poll-limit N most tasks/get per second (default: 10)",
		"lease":      "--lease DURATION fails its tasks this long (plus a 2s grace) (default: 15s)",
		"log-level":  "--log-level LEVEL debug, info (default: info)",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d: %q", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}
