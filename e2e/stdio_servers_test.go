package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The stdio MCP servers published on npm (pinned in js/package.json),
// each driven by two TypeScript SDK clients at once (js/stdio-servers.mjs):
// directly, each client starting the server itself over stdio as a desktop
// client does, and through one gateway that runs the same command
// (--upstream-command, default flags). Through taskgate each client must
// get what it gets from its own process: its roots, its state, its
// capabilities, its answers to the server's questions, its large answers.
// A child shared by every session (--upstream-shared) fails the
// filesystem, memory, thinking and everything tests; a 4 MiB line limit
// (--upstream-max-message 4MiB, the old limit) fails the filesystem and
// commands tests; the shared child of earlier releases, which such a line
// stopped for every session, fails all five.

// npmServer is the command that runs the stdio server at rel (under
// js/node_modules) with node.
func npmServer(t *testing.T, node, rel string, args ...string) []string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("js", "node_modules", rel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("%s is not installed (npm ci in e2e/js): %v", rel, err)
	}
	return append([]string{node, script}, args...)
}

// shellWords is argv as one --upstream-command line: every word single-quoted.
func shellWords(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// runPeers runs js/stdio-servers.mjs scenario twice at once: directly
// (each of its clients starts command over stdio) and through a gateway
// in front of command started with flags. env is added to the script's
// environment. It returns what each run printed.
func runPeers(t *testing.T, node, scenario string, command, env []string, flags ...string) (direct, through []byte) {
	t.Helper()
	g := startGateway(t, "stdio:"+shellWords(command), flags...)
	targets := map[string][]string{"direct": append([]string{"direct"}, command...), "gateway": {g.URL}}
	outs, errs := map[string][]byte{}, map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for via, args := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, append([]string{"stdio-servers.mjs", scenario}, args...)...)
			cmd.Dir = "js"
			cmd.Env = append(os.Environ(), env...)
			cmd.WaitDelay = 5 * time.Second
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			var res struct {
				Error        string   `json:"error"`
				ClientErrors []string `json:"clientErrors"`
			}
			if jerr := json.Unmarshal(bytes.TrimSpace(out), &res); err == nil && jerr != nil {
				err = jerr
			} else if err == nil && res.Error != "" {
				err = errors.New(res.Error)
			}
			// The SDK reports progress that comes after the call it was
			// for has ended (a server-everything habit, direct too).
			res.ClientErrors = slices.DeleteFunc(res.ClientErrors, func(e string) bool {
				return strings.Contains(e, "progress notification for an unknown token")
			})
			if len(res.ClientErrors) > 0 {
				t.Logf("%s %s: client errors: %v", scenario, via, res.ClientErrors)
			}
			mu.Lock()
			defer mu.Unlock()
			outs[via] = bytes.TrimSpace(out)
			if err != nil {
				errs[via] = fmt.Errorf("%w\nstdout: %s\nstderr: %s", err, out, stderr.Bytes())
			}
		}()
	}
	wg.Wait()
	for via, err := range errs {
		t.Errorf("node stdio-servers.mjs %s (%s): %v", scenario, via, err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return outs["direct"], outs["gateway"]
}

// decodeBoth decodes what the direct and the gateway runs printed.
func decodeBoth[T any](t *testing.T, direct, through []byte) (d, g T) {
	t.Helper()
	if err := json.Unmarshal(direct, &d); err != nil {
		t.Fatalf("direct run printed %s: %v", direct, err)
	}
	if err := json.Unmarshal(through, &g); err != nil {
		t.Fatalf("gateway run printed %s: %v", through, err)
	}
	return d, g
}

// sameAsDirect fails the test unless the two runs printed the same thing
// (key order aside; clientErrors are logged, not compared, and
// gatewayOnly is what only a gateway can do, such as tasks).
func sameAsDirect(t *testing.T, direct, through []byte) {
	t.Helper()
	strip := func(raw []byte) string {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		delete(m, "clientErrors")
		delete(m, "gatewayOnly")
		b, _ := json.Marshal(m)
		return canonicalJSON(b)
	}
	if d, g := strip(direct), strip(through); d != g {
		t.Errorf("through taskgate the clients saw otherwise than directly:\n--- direct\n%.3000s\n--- gateway\n%.3000s", d, g)
	}
}

type toolText struct {
	IsError bool   `json:"isError"`
	Text    string `json:"text"`
	Error   *tsErr `json:"error"`
}

// TestStdioServerFilesystem: server-filesystem started with no folder
// takes its allowed folders from the client's roots, which it asks for
// right after initialized. Client A declares fsA, client B fsB, at once:
// each is asked (no roots/list_changed sent), each is allowed its own
// folder only, B is denied A's secret and reads its own file; client C,
// which declares no roots, has no folder and is denied A's secret too; A
// reads a 3 MiB file (about 6.3 MB of JSON on one line of the child's
// stdout).
func TestStdioServerFilesystem(t *testing.T) {
	t.Parallel()
	node := ensureJS(t)
	dir := t.TempDir()
	dirA, dirB := filepath.Join(dir, "fsA"), filepath.Join(dir, "fsB")
	if err := os.MkdirAll(dirA, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dirB, 0o755); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte(strings.Repeat("0123456789abcdef", 63)+"taskgate e2e \"3 MiB\"\n"), 3<<20/1029+1)[:3<<20]
	for name, content := range map[string][]byte{
		filepath.Join(dirA, "secretA.txt"): []byte("A's secret\n"),
		filepath.Join(dirA, "big.txt"):     big,
		filepath.Join(dirB, "b.txt"):       []byte("B's own\n"),
	} {
		if err := os.WriteFile(name, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	direct, through := runPeers(t, node, "filesystem",
		npmServer(t, node, "@modelcontextprotocol/server-filesystem/dist/index.js"),
		[]string{"TG_FS_A=" + dirA, "TG_FS_B=" + dirB})
	type out struct {
		A struct {
			Roots   int    `json:"roots"`
			Allowed string `json:"allowed"`
			Secret  string `json:"secret"`
		} `json:"a"`
		B struct {
			Roots   int      `json:"roots"`
			Allowed string   `json:"allowed"`
			SecretA toolText `json:"secretA"`
			Own     string   `json:"own"`
		} `json:"b"`
		C struct {
			SecretA toolText `json:"secretA"`
		} `json:"c"`
		Big struct {
			IsError bool   `json:"isError"`
			Error   *tsErr `json:"error"`
			Length  int    `json:"length"`
			SHA256  string `json:"sha256"`
		} `json:"big"`
	}
	sum := sha256.Sum256(big)
	d, g := decodeBoth[out](t, direct, through)
	for via, o := range map[string]out{"direct": d, "gateway": g} {
		if o.A.Roots != 1 || o.B.Roots != 1 {
			t.Errorf("%s: roots/list asked of A %d times, of B %d; want once each, unprompted", via, o.A.Roots, o.B.Roots)
		}
		if o.A.Allowed != "Allowed directories:\n"+dirA || o.B.Allowed != "Allowed directories:\n"+dirB {
			t.Errorf("%s: allowed directories A %q, B %q; want each its own root", via, o.A.Allowed, o.B.Allowed)
		}
		if o.A.Secret != "A's secret\n" {
			t.Errorf("%s: A reads its secret: %q", via, o.A.Secret)
		}
		if !o.B.SecretA.IsError || !strings.Contains(o.B.SecretA.Text, "Access denied") {
			t.Errorf("%s: B reads A's secret: %+v, want access denied", via, o.B.SecretA)
		}
		if !o.C.SecretA.IsError || !strings.Contains(o.C.SecretA.Text, "Access denied") {
			t.Errorf("%s: C, with no roots, reads A's secret: %+v, want access denied", via, o.C.SecretA)
		}
		if o.B.Own != "B's own\n" {
			t.Errorf("%s: B reads its own file: %q", via, o.B.Own)
		}
		if o.Big.IsError || o.Big.Error != nil || o.Big.Length != len(big) || o.Big.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: the 3 MiB file: %+v, want %d characters with sha256 %x", via, o.Big, len(big), sum)
		}
	}
	sameAsDirect(t, direct, through)
}

// TestStdioServerMemory: server-memory keeps its knowledge graph in a
// file; the command gives each process a file of its own (mktemp), so the
// graph is the process's state, as with a server per user. A's entity is
// not B's, and B's is not A's.
func TestStdioServerMemory(t *testing.T) {
	t.Parallel()
	node := ensureJS(t)
	script := npmServer(t, node, "@modelcontextprotocol/server-memory/dist/index.js")
	command := append([]string{"sh", "-c", `MEMORY_FILE_PATH=$(mktemp -p "$1") exec "$2" "$3"`, "sh", t.TempDir()}, script...)
	direct, through := runPeers(t, node, "memory", command, nil)
	type out struct {
		A []string `json:"a"`
		B []string `json:"b"`
	}
	d, g := decodeBoth[out](t, direct, through)
	for via, o := range map[string]out{"direct": d, "gateway": g} {
		if !slices.Equal(o.A, []string{"alice-secret"}) || !slices.Equal(o.B, []string{"bob-note"}) {
			t.Errorf("%s: A's graph %q, B's %q; want [alice-secret] and [bob-note]", via, o.A, o.B)
		}
	}
	sameAsDirect(t, direct, through)
}

// TestStdioServerSequentialThinking: server-sequential-thinking keeps the
// thought history and branches in the process. After A's three thoughts
// and a branch, B's first thought answers thoughtHistoryLength 1 and no
// branch, also as a task (--task: the task's worker calls B's process);
// A's fourth answers 4.
func TestStdioServerSequentialThinking(t *testing.T) {
	t.Parallel()
	node := ensureJS(t)
	direct, through := runPeers(t, node, "thinking",
		npmServer(t, node, "@modelcontextprotocol/server-sequential-thinking/dist/index.js"), nil,
		"--task", "sequentialthinking", "--poll-interval", "100ms")
	type thought struct {
		ThoughtNumber        int      `json:"thoughtNumber"`
		Branches             []string `json:"branches"`
		ThoughtHistoryLength int      `json:"thoughtHistoryLength"`
	}
	type out struct {
		A           []thought `json:"a"`
		B           []thought `json:"b"`
		GatewayOnly struct {
			BTask []string `json:"bTask"`
		} `json:"gatewayOnly"`
	}
	d, g := decodeBoth[out](t, direct, through)
	if bt := g.GatewayOnly.BTask; len(bt) < 2 || bt[0] != "taskCreated" || bt[len(bt)-1] != "result" || !slices.Equal(d.GatewayOnly.BTask, []string{"result"}) {
		t.Errorf("B's first thought: %v through taskgate, %v directly; want a task (taskCreated … result), and a plain call", bt, d.GatewayOnly.BTask)
	}
	for via, o := range map[string]out{"direct": d, "gateway": g} {
		if len(o.B) != 1 || o.B[0].ThoughtHistoryLength != 1 || len(o.B[0].Branches) != 0 {
			t.Errorf("%s: B's first thought: %+v, want thoughtHistoryLength 1 and no branch", via, o.B)
		}
		if len(o.A) != 4 || o.A[3].ThoughtHistoryLength != 4 || !slices.Equal(o.A[3].Branches, []string{"a-branch"}) {
			t.Errorf("%s: A's thoughts: %+v, want the fourth at thoughtHistoryLength 4 with branch a-branch", via, o.A)
		}
	}
	sameAsDirect(t, direct, through)
}

// TestStdioServerEverything: server-everything offers the tools the
// client's capabilities allow: 16 to A (elicitation, sampling, roots), 13
// to B (none), which is told a sampling tool is not there. A's
// elicitation and sampling requests come while two long calls of A's and
// one of B's are in flight (one of A's runs until they are answered), and
// A answers them as it does directly. A's long call as
// a task (2025-11-25, --task) ends with the answer the plain call gets
// directly.
func TestStdioServerEverything(t *testing.T) {
	t.Parallel()
	node := ensureJS(t)
	direct, through := runPeers(t, node, "everything",
		npmServer(t, node, "@modelcontextprotocol/server-everything/dist/index.js", "stdio"), nil,
		"--task", "trigger-long-running-operation", "--poll-interval", "100ms")
	type taskMsg struct {
		Type   string `json:"type"`
		Status string `json:"status"`
		Text   string `json:"text"`
		Error  *tsErr `json:"error"`
	}
	type out struct {
		ToolsA []string `json:"toolsA"`
		ToolsB []string `json:"toolsB"`
		A      struct {
			Elicit       toolText  `json:"elicit"`
			Sample       toolText  `json:"sample"`
			Long         toolText  `json:"long"`
			Held         toolText  `json:"held"`
			Progress     bool      `json:"progress"`
			Elicitations []string  `json:"elicitations"`
			Samples      []string  `json:"samples"`
			Task         []taskMsg `json:"task"`
		} `json:"a"`
		B struct {
			Long      toolText `json:"long"`
			Unoffered toolText `json:"unoffered"`
		} `json:"b"`
	}
	const long3 = "Long running operation completed. Duration: 3 seconds, Steps: 3."
	d, g := decodeBoth[out](t, direct, through)
	for via, o := range map[string]out{"direct": d, "gateway": g} {
		if len(o.ToolsA) != 16 || !slices.Contains(o.ToolsA, "trigger-elicitation-request") || len(o.ToolsB) != 13 ||
			slices.Contains(o.ToolsB, "trigger-sampling-request") || slices.Contains(o.ToolsB, "get-roots-list") {
			t.Errorf("%s: A is offered %d tools, B %d (%q); want 16 and 13, none needing a capability B lacks", via, len(o.ToolsA), len(o.ToolsB), o.ToolsB)
		}
		if o.A.Elicit.IsError || !strings.Contains(o.A.Elicit.Text, "Name: A answers") || len(o.A.Elicitations) != 1 {
			t.Errorf("%s: elicitation during concurrent calls: %+v after %d questions; want A's answer", via, o.A.Elicit, len(o.A.Elicitations))
		}
		if o.A.Sample.IsError || !strings.Contains(o.A.Sample.Text, "A sampled: Resource trigger-sampling-request context: hello from A") || len(o.A.Samples) != 1 {
			t.Errorf("%s: sampling during concurrent calls: %+v after %d requests; want A's answer", via, o.A.Sample, len(o.A.Samples))
		}
		if o.A.Long.Text != long3 || o.B.Long.Text != long3 || !o.A.Progress {
			t.Errorf("%s: the long calls: A %+v (progress %t), B %+v", via, o.A.Long, o.A.Progress, o.B.Long)
		}
		if o.A.Held.Error == nil || !strings.HasSuffix(o.A.Held.Error.Message, ": answered") {
			t.Errorf("%s: the call A abandoned once its questions were answered: %+v, still in flight until then", via, o.A.Held)
		}
		if !o.B.Unoffered.IsError || !strings.Contains(o.B.Unoffered.Text, "Tool trigger-sampling-request not found") {
			t.Errorf("%s: B calls the sampling tool it was not offered: %+v, want tool not found", via, o.B.Unoffered)
		}
	}
	// The tool is not a task directly (taskSupport forbidden: the client
	// calls it plainly); through taskgate it is, with the same answer.
	const long1 = "Long running operation completed. Duration: 1 seconds, Steps: 2."
	last := func(ms []taskMsg) taskMsg {
		if len(ms) == 0 {
			return taskMsg{}
		}
		return ms[len(ms)-1]
	}
	if m := last(d.A.Task); m.Type != "result" || m.Text != long1 {
		t.Errorf("direct: the long call: %+v", d.A.Task)
	}
	if m := last(g.A.Task); len(g.A.Task) < 2 || g.A.Task[0].Type != "taskCreated" || m.Type != "result" || m.Text != long1 {
		t.Errorf("gateway: the long call as a task: %+v, want taskCreated … result %q", g.A.Task, long1)
	}
}

// TestStdioServerCommands: mcp-server-commands. While B's command runs
// (it waits until A has its answer), A's command prints 5 MB of control
// bytes; the server answers the first MiB of it, escaped, on one line of
// about 6.3 MB. A gets that answer and its next call works; B's command
// finishes undisturbed.
func TestStdioServerCommands(t *testing.T) {
	t.Parallel()
	node := ensureJS(t)
	direct, through := runPeers(t, node, "commands", npmServer(t, node, "mcp-server-commands/build/index.js"), nil)
	type out struct {
		A struct {
			IsError      bool   `json:"isError"`
			Error        *tsErr `json:"error"`
			ControlBytes int    `json:"controlBytes"`
			Head         string `json:"head"`
			After        any    `json:"after"`
		} `json:"a"`
		B toolText `json:"b"`
	}
	d, g := decodeBoth[out](t, direct, through)
	for via, o := range map[string]out{"direct": d, "gateway": g} {
		if o.A.Error != nil || o.A.ControlBytes != 1<<20 || o.A.Head != "stdout maxBuffer length exceeded" || o.A.After != "small\n" {
			t.Errorf("%s: A's large output: %+v, want the server's answer with 1 MiB of output, then its next call", via, o.A)
		}
		if o.B.IsError || o.B.Error != nil || o.B.Text != "done\n" {
			t.Errorf("%s: B's command running meanwhile: %+v, want done", via, o.B)
		}
	}
	sameAsDirect(t, direct, through)
}
