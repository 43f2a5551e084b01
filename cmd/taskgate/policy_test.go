package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/policy"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// policyFrom runs a serve command with the policy flags on args and
// returns its policy source and the Config it builds first.
func policyFrom(t *testing.T, args ...string) (*policySource, *policy.Config, error) {
	t.Helper()
	var src *policySource
	var cfg *policy.Config
	var rerr error
	app := &cli.App{Name: "taskgate", Commands: []*cli.Command{{
		Name:  "serve",
		Flags: append(append(storeFlags(), ruleFlags()...), policyFlags(true)...),
		Action: func(c *cli.Context) error {
			rules, err := taskRules(c)
			if err != nil {
				rerr = err
				return nil
			}
			if src, rerr = newPolicySource(c, rules); rerr != nil {
				return nil
			}
			data, err := src.read()
			if err != nil {
				rerr = err
				return nil
			}
			cfg, rerr = src.build(data)
			return nil
		},
	}}}
	if err := app.Run(append([]string{"taskgate", "serve"}, args...)); err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return src, cfg, rerr
}

func TestPolicyFlagsBuildConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rules.json")
	writeFile(t, file, `{"rules": [{"tool": "deploy_*", "mode": "sync"}, {"tool": "*", "mode": "task"}]}`)
	_, cfg, err := policyFrom(t, "--policy", file, "--task-required", "deploy_*", "--auto-after", "5s", "--poll-interval", "3s")
	if err != nil {
		t.Fatal(err)
	}
	// Flags first, then the file.
	if got := ruleString(cfg.Rules); got != "task-required:deploy_* sync:deploy_* task:*" {
		t.Errorf("rules %q", got)
	}
	if cfg.AutoAfter != 5*time.Second || cfg.HybridWait != policy.DefaultHybridWait || cfg.DefaultPoll != 3*time.Second {
		t.Errorf("config %+v", cfg)
	}
	if d := policy.Decide(cfg, policy.Tool{Name: "deploy_x"}, policy.Client2025, "", policy.Stats{}); d.Reason != "rule 1: deploy_* (--task-required)" {
		t.Errorf("reason %q", d.Reason)
	}
	// Without --policy: the flags alone, defaults for the durations.
	_, cfg, err = policyFrom(t, "--sync", "x")
	if err != nil || ruleString(cfg.Rules) != "sync:x" || cfg.AutoAfter != 2*time.Second || cfg.HybridWait != time.Second {
		t.Errorf("no --policy: %+v %v", cfg, err)
	}
}

func TestPolicyFlagErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	writeFile(t, bad, "{\"rules\": [\n  {\"tool\": \"x\", \"mode\": \"tsk\"}\n]}")
	syntax := filepath.Join(dir, "syntax.json")
	writeFile(t, syntax, "{\"rules\": [\n  {\"tool\": \"x\" \"mode\": \"task\"}\n]}")
	big := filepath.Join(dir, "big.json")
	writeFile(t, big, strings.Repeat(" ", maxPolicyFile+1))
	up := "--upstream=http://127.0.0.1:1/mcp"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", up, "--auto-after", "0s"}, "invalid --auto-after 0s: it must be positive"},
		{[]string{"serve", up, "--hybrid-wait", "-1s"}, "invalid --hybrid-wait -1s: it must be positive"},
		{[]string{"serve", up, "--hybrid-wait", "soon"}, `--hybrid-wait wants a duration such as 500ms, 30s or 2m, got "soon"`},
		{[]string{"serve", up, "--policy", filepath.Join(dir, "missing.json")}, "cannot read --policy " + dir + "/missing.json: no such file or directory"},
		{[]string{"serve", up, "--policy", bad}, "invalid --policy: " + bad + `: rule 1 (line 2): unknown mode "tsk"`},
		{[]string{"serve", up, "--policy", syntax}, "invalid --policy: " + syntax + ":2:16: invalid character"},
		{[]string{"serve", up, "--policy", big}, "larger than 1MiB"},
		{[]string{"serve", up, "--replica-id", "a b"}, `invalid --replica-id "a b": only printable ASCII without spaces`},
		{[]string{"serve", up, "--replica-id", strings.Repeat("r", 65)}, "invalid --replica-id \"" + strings.Repeat("r", 65) + "\": at most 64 characters"},
	}
	for _, tt := range tests {
		err := run(append([]string{"taskgate"}, tt.args...), &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line containing %q", tt.args, err, tt.want)
		}
	}
}

// TestPolicyReload: a changed file is put in force; a broken one is logged
// once and the rules in force stay; SIGHUP reloads even an unchanged file.
func TestPolicyReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rules.json")
	writeFile(t, file, `{"rules": [{"tool": "a", "mode": "task"}]}`)
	src, cfg, err := policyFrom(t, "--policy", file, "--sync", "flag")
	if err != nil {
		t.Fatal(err)
	}
	cur := policy.NewCurrent(cfg)
	var logs bytes.Buffer
	data, _ := src.read()
	rl := &policyReloader{src: src, cur: cur, log: zerolog.New(&logs), last: data}
	rules := func() string { return ruleString(cur.Load().Rules) }

	rl.reload(false) // unchanged: nothing happens
	if logs.Len() != 0 || rules() != "sync:flag task:a" {
		t.Fatalf("unchanged file: %q %s", rules(), logs.String())
	}
	writeFile(t, file, `{"rules": [{"tool": "b", "mode": "task-required"}]}`)
	rl.reload(false)
	if rules() != "sync:flag task-required:b" || !strings.Contains(logs.String(), `"message":"policy reloaded"`) {
		t.Fatalf("changed file: %q %s", rules(), logs.String())
	}

	logs.Reset()
	writeFile(t, file, "{\"rules\": [\n{\"tool\": \"c\", \"mode\": \"bad\"}]}")
	rl.reload(false)
	rl.reload(false)
	if rules() != "sync:flag task-required:b" {
		t.Errorf("a broken file replaced the rules: %q", rules())
	}
	if n := strings.Count(logs.String(), "policy not reloaded"); n != 1 || !strings.Contains(logs.String(), "rule 1 (line 2)") {
		t.Errorf("broken file logged %d times: %s", n, logs.String())
	}

	logs.Reset()
	os.Remove(file)
	rl.reload(false)
	rl.reload(false)
	if rules() != "sync:flag task-required:b" || strings.Count(logs.String(), "no such file") != 1 {
		t.Errorf("missing file: %q %s", rules(), logs.String())
	}

	// SIGHUP through run: reloads the (restored) file.
	logs.Reset()
	writeFile(t, file, `{"rules": [{"tool": "d", "mode": "sync"}]}`)
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rl.run(ctx, hup, time.Hour) }()
	hup <- syscall.SIGHUP
	deadline := time.Now().Add(5 * time.Second)
	for rules() != "sync:flag sync:d" && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if rules() != "sync:flag sync:d" || !strings.Contains(logs.String(), `"sighup":true`) {
		t.Errorf("SIGHUP: %q %s", rules(), logs.String())
	}
}

// TestPolicyReloadOnChange: run notices a changed file by itself.
func TestPolicyReloadOnChange(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rules.json")
	writeFile(t, file, `{"rules": []}`)
	src, cfg, err := policyFrom(t, "--policy", file)
	if err != nil {
		t.Fatal(err)
	}
	cur := policy.NewCurrent(cfg)
	data, _ := src.read()
	rl := &policyReloader{src: src, cur: cur, log: zerolog.Nop(), last: data}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rl.run(ctx, nil, 5*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	writeFile(t, file, `{"rules": [{"tool": "x", "mode": "task"}]}`)
	deadline := time.Now().Add(5 * time.Second)
	for ruleString(cur.Load().Rules) != "task:x" {
		if time.Now().After(deadline) {
			t.Fatalf("change not picked up: %q", ruleString(cur.Load().Rules))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReplicaIDDefault: without --replica-id the replica is named after
// the host; a given id is kept as is.
func TestReplicaIDDefault(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip("no hostname here:", err)
	}
	if id, err := replicaID(""); err != nil || id != host {
		t.Errorf("replicaID(\"\") = %q, %v; want the hostname %q", id, err, host)
	}
	if id, err := replicaID("web-2"); err != nil || id != "web-2" {
		t.Errorf("replicaID(web-2) = %q, %v", id, err)
	}
}

// TestPolicyYAMLEqualsJSON: --policy takes the same rules in YAML as in
// JSON (issue 40: a YAML file got a JSON syntax error), and a YAML file's
// mistake names its line.
func TestPolicyYAMLEqualsJSON(t *testing.T) {
	dir := t.TempDir()
	js, ym, bad := filepath.Join(dir, "rules.json"), filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "bad.yml")
	writeFile(t, js, `{"rules": [{"tool": "deploy_*", "mode": "task-required", "ttl": "2h"}, {"tool": "*", "annotations": {"readOnlyHint": true}, "mode": "sync"}]}`)
	writeFile(t, ym, "rules:\n  - {tool: deploy_*, mode: task-required, ttl: 2h}\n  - tool: \"*\"\n    annotations: {readOnlyHint: true}\n    mode: sync\n")
	writeFile(t, bad, "rules:\n  - tool: a\n    mode: often\n")
	_, fromJSON, err := policyFrom(t, "--policy", js)
	if err != nil {
		t.Fatal(err)
	}
	_, fromYAML, err := policyFrom(t, "--policy", ym)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := ruleString(fromJSON.Rules), ruleString(fromYAML.Rules); a != b || a == "" {
		t.Fatalf("JSON rules %q, YAML rules %q", a, b)
	}
	if _, _, err := policyFrom(t, "--policy", bad); err == nil || !strings.Contains(err.Error(), "bad.yml: rule 1 (line 3)") {
		t.Fatalf("a wrong YAML rule: %v", err)
	}
}

// configMapVolume is a directory laid out as the kubelet lays out a
// mounted ConfigMap (its AtomicWriter): the files live in a timestamped
// directory, ..data links to it, and each key is a link through ..data.
type configMapVolume struct {
	t   *testing.T
	dir string
	gen int
}

// update writes a new generation of the files and swaps ..data to it in
// one rename, then removes the old generation, as the kubelet does.
func (v *configMapVolume) update(files map[string]string) {
	v.t.Helper()
	v.gen++
	gen := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", v.gen, v.gen)
	if err := os.Mkdir(filepath.Join(v.dir, gen), 0o755); err != nil {
		v.t.Fatal(err)
	}
	for name, content := range files {
		writeFile(v.t, filepath.Join(v.dir, gen, name), content)
	}
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(gen, tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(v.dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				v.t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, old)); err != nil {
			v.t.Fatal(err)
		}
	}
}

// TestPolicyReloadConfigMapSwap: a rules file mounted from a ConfigMap
// (the Helm chart's) is reloaded when the kubelet swaps the ..data link
// to a new generation: the file's own path never changes, so the check
// must read through the links each time, not watch the inode it opened
// first (issue 40, item 7).
func TestPolicyReloadConfigMapSwap(t *testing.T) {
	vol := &configMapVolume{t: t, dir: t.TempDir()}
	vol.update(map[string]string{"policy.json": `{"rules": [{"tool": "a", "mode": "task"}]}`})
	file := filepath.Join(vol.dir, "policy.json")
	src, cfg, err := policyFrom(t, "--policy", file)
	if err != nil {
		t.Fatal(err)
	}
	cur := policy.NewCurrent(cfg)
	var logs bytes.Buffer
	data, _ := src.read()
	rl := &policyReloader{src: src, cur: cur, log: zerolog.New(&logs), last: data}
	if got := ruleString(cur.Load().Rules); got != "task:a" {
		t.Fatalf("first generation: %q", got)
	}
	for i, want := range []string{"task-required:b", "sync:c"} {
		mode, tool, _ := strings.Cut(want, ":")
		vol.update(map[string]string{"policy.json": `{"rules": [{"tool": "` + tool + `", "mode": "` + mode + `"}]}`})
		rl.reload(false)
		if got := ruleString(cur.Load().Rules); got != want {
			t.Fatalf("after swap %d: rules %q, want %q; log %s", i+1, got, want, logs.String())
		}
	}
	if n := strings.Count(logs.String(), `"message":"policy reloaded"`); n != 2 || strings.Contains(logs.String(), "not reloaded") {
		t.Errorf("want two reloads and no error logged: %s", logs.String())
	}
}
