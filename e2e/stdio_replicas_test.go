package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// replicasOut is what js/replicas.mjs saw.
type replicasOut struct {
	Error     string `json:"error"`
	Exchanges []struct {
		Session string `json:"session"`
		HTTP    string `json:"http"`
		RPC     string `json:"rpc"`
		Replica int    `json:"replica"`
		Status  int    `json:"status"`
		Type    string `json:"type"`
	} `json:"exchanges"`
	Steps struct {
		SessionA    string   `json:"sessionA"`
		GraphA      []string `json:"graphA"`
		GraphB      []string `json:"graphB"`
		AfterDelete []int    `json:"afterDelete"`
		AfterKill   struct {
			OK      bool   `json:"ok"`
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"afterKill"`
		SessionC string   `json:"sessionC"`
		GraphC   []string `json:"graphC"`
		GraphC2  []string `json:"graphC2"`
	} `json:"steps"`
}

// TestStdioReplicasMemory: server-memory (npm) behind two replicas with a
// process per session, sharing a real redis-server, driven by the
// TypeScript SDK client: sessions opened on replica 1 are served by their
// process there whichever replica a request lands on (calls and their SSE
// answers, the GET stream, DELETE through replica 2, which starts no
// process for them); once replica 1 is killed its sessions get 404 on
// replica 2 and the client starts over there.
//
// Each replica's processes keep their graph in a file of that replica's
// own (MEMORY_FILE_PATH), so a graph read through replica 2 shows which
// replica's process answered.
func TestStdioReplicasMemory(t *testing.T) {
	node := ensureJS(t)
	bin, err := filepath.Abs(filepath.Join("js", "node_modules", ".bin", "mcp-server-memory"))
	if err != nil {
		t.Fatal(err)
	}
	redisURL := "redis://" + redistest.Start(t)
	var gs []*gateway
	for range 2 {
		g := startGateway(t, "stdio:"+bin, "--redis-url", redisURL,
			"--upstream-env", "MEMORY_FILE_PATH="+filepath.Join(t.TempDir(), "memory.jsonl"))
		gs = append(gs, g)
	}
	out := runReplicasNode(t, node, gs[0], gs[1])
	if out.Error != "" {
		t.Fatalf("replicas.mjs: %s", out.Error)
	}
	s := out.Steps
	if !slices.Equal(s.GraphA, []string{"ada"}) || !slices.Equal(s.GraphB, []string{"ada"}) {
		t.Errorf("graphs read through replica 2: a %v, b %v; want [ada] from replica 1's processes", s.GraphA, s.GraphB)
	}
	var sawGet, sawDelete, sawStream bool
	for _, e := range out.Exchanges {
		if e.Session != "a" {
			continue
		}
		if e.RPC != "initialize" && e.Replica != 2 {
			t.Errorf("session a: %s %s went to replica %d", e.HTTP, e.RPC, e.Replica)
		}
		switch {
		case sawDelete: // the SDK may open its GET stream again, and get 404
		case e.HTTP == "GET":
			sawGet = e.Status == 200 && strings.HasPrefix(e.Type, "text/event-stream")
		case e.HTTP == "DELETE":
			sawDelete = e.Status == 200
		case e.RPC == "tools/call":
			sawStream = e.Status == 200 && strings.HasPrefix(e.Type, "text/event-stream")
		}
	}
	if !sawGet || !sawDelete || !sawStream {
		t.Errorf("through replica 2: GET stream %v, DELETE %v, a call's SSE answer %v; want all", sawGet, sawDelete, sawStream)
	}
	if !slices.Equal(s.AfterDelete, []int{404, 404}) {
		t.Errorf("the deleted session on replicas 1 and 2: HTTP %v, want 404 on both", s.AfterDelete)
	}
	if s.AfterKill.OK || s.AfterKill.Code != 404 {
		t.Errorf("session b after replica 1 died: %+v, want HTTP 404", s.AfterKill)
	}
	if s.SessionC == "" || len(s.GraphC) != 0 || !slices.Equal(s.GraphC2, []string{"grace"}) {
		t.Errorf("the new session on replica 2: %q, graph %v then %v; want its own empty graph, then [grace]", s.SessionC, s.GraphC, s.GraphC2)
	}
	if n := len(childPIDs(gs[1].stderr.String())); n != 1 {
		t.Errorf("replica 2 started %d processes, want 1 (only for the session opened after replica 1 died)", n)
	}
	if n := len(childPIDs(gs[0].stderr.String())); n != 2 {
		t.Errorf("replica 1 started %d processes, want 2 (sessions a and b)", n)
	}

	// Replica 2 shuts down: its session's record goes with it.
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(redisURL, "redis://")})
	defer rdb.Close()
	sum := sha256.Sum256([]byte(s.SessionC))
	key := "tg:stdio:" + hex.EncodeToString(sum[:16])
	if got := rdb.Get(context.Background(), key).Val(); got != gs[1].base {
		t.Errorf("record of session c = %q, want replica 2's %q", got, gs[1].base)
	}
	gs[1].stop()
	if n := rdb.Exists(context.Background(), key).Val(); n != 0 {
		t.Errorf("replica 2 shut down, and its session's record stays")
	}
}

// runReplicasNode runs js/replicas.mjs against two replicas, killing the
// first (SIGKILL, by its PID) when the script asks.
func runReplicasNode(t *testing.T, node string, g1, g2 *gateway) *replicasOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "replicas.mjs", g1.URL, g2.URL)
	cmd.Dir = "js"
	cmd.WaitDelay = 5 * time.Second
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out *replicasOut
	var lines []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		var l struct {
			Await  string       `json:"await"`
			Result *replicasOut `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch {
		case l.Await == "kill":
			_ = g1.cmd.Process.Signal(syscall.SIGKILL)
			<-g1.done
			_, _ = io.WriteString(stdin, "killed\n")
		case l.Result != nil:
			out = l.Result
		}
	}
	_ = cmd.Wait()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replicas.mjs output:\n%s\nstderr: %s", strings.Join(lines, "\n"), stderr.String())
		}
	})
	if out == nil {
		t.Fatalf("replicas.mjs printed no result (%v)\nstdout: %s\nstderr: %s", cmd.ProcessState, strings.Join(lines, "\n"), stderr.String())
	}
	return out
}

// TestStdioReplicasTasks: the TypeScript SDK's task scenarios with a
// process per session on two replicas sharing Redis, every request to the
// next replica in turn: the session's calls reach its process on the
// replica that opened it, and the task created through one replica is
// polled, answered and cancelled through the other.
func TestStdioReplicasTasks(t *testing.T) {
	node := ensureJS(t)
	for _, sc := range []string{"lifecycle", "cancel"} {
		t.Run(sc, func(t *testing.T) {
			t.Parallel()
			rec := &testupstream.Recorder{}
			args := append(slices.Clone(taskFlags), "--redis-url", "redis://"+redistest.Start(t))
			var urls []string
			var gs []*gateway
			for range 2 {
				g := startGateway(t, stdioUpstream(t), args...)
				recordChild(g, rec)
				urls = append(urls, g.URL)
				gs = append(gs, g)
			}
			out := runTasksNode(t, node, sc, urls)
			checkSession(t, out)
			switch sc {
			case "lifecycle":
				checkLifecycle(t, out, rec, false)
			case "cancel":
				checkCancel(t, out, rec)
			}
			checkNoProgressAfterTerminal(t, out)
			checkAlternation(t, out)
			if n1, n2 := len(childPIDs(gs[0].stderr.String())), len(childPIDs(gs[1].stderr.String())); n1+n2 != 1 {
				t.Errorf("processes started: %d on replica 1, %d on replica 2; want 1 in all (one session)", n1, n2)
			}
			for i, g := range gs {
				if strings.Contains(g.stderr.String(), "refused the hop") {
					t.Errorf("replica %d: a hop was refused:\n%s", i+1, g.stderr.String())
				}
			}
		})
	}
}

// TestStdioReplicasStartErrors: --advertise-url that cannot be used stops
// serve at once with one line saying why.
func TestStdioReplicasStartErrors(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	redisURL := "redis://" + redistest.Start(t)
	perSession := []string{"serve", "--listen", "127.0.0.1:0", "--upstream-command", stdioServerBin + " --stdio"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1/mcp", "--advertise-url", "http://10.0.0.1:8080"}, "--advertise-url goes with --upstream-command"},
		{append(slices.Clone(perSession), "--advertise-url", "http://10.0.0.1:8080"), "--advertise-url goes with a process per session and --redis-url"},
		{append(slices.Clone(perSession), "--redis-url", redisURL, "--advertise-url", "10.0.0.1:8080"), "invalid --advertise-url"},
		{append(slices.Clone(perSession), "--redis-url", redisURL, "--advertise-url", "http://10.0.0.1:8080/mcp"), "invalid --advertise-url"},
		{append(slices.Clone(perSession), "--redis-url", redisURL, "--path", "/_taskgate/stdio-hop"), "the replicas use it among themselves"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, taskgateBin, tc.args...).CombinedOutput()
		cancel()
		var last string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if !strings.HasPrefix(l, "{") { // serve's own log lines are JSON; the error is not
				last = l
			}
		}
		if err == nil || !strings.Contains(last, tc.want) {
			t.Errorf("%v: %v\n%s\nwant a line with %q", tc.args, err, out, tc.want)
		}
	}
}

// TestStdioReplicasModernClient: a 2026-07-28 client (ext-tasks) on two
// replicas with a process per session. The gateway holds one upstream
// session per owner, opened on one replica and recorded in Redis; the
// other replica's requests on it reach its process over the hop.
func TestStdioReplicasModernClient(t *testing.T) {
	node := ensureJS(t)
	d := &modernDeployment{rec: &testupstream.Recorder{}}
	args := []string{"--task", "elicit", "--task", "slow", "--task", "fail", "--task", "rpcerror", "--poll-interval", "100ms",
		"--redis-url", "redis://" + redistest.Start(t)}
	var gs []*gateway
	for range 2 {
		g := startGateway(t, stdioUpstream(t), args...)
		recordChild(g, d.rec)
		d.urls = append(d.urls, g.URL)
		gs = append(gs, g)
	}
	out := runExtTasks(t, node, "elicit,elicit2,outcomes,cancel", d.urls)
	checkExtTasks(t, out, d, false)
	if n1, n2 := len(childPIDs(gs[0].stderr.String())), len(childPIDs(gs[1].stderr.String())); n1+n2 != 1 {
		t.Errorf("processes started: %d on replica 1, %d on replica 2; want 1 in all (one owner session)", n1, n2)
	}
}
