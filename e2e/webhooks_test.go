package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

var e2eWebhookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("e2e-webhook-secret-32-bytes-long"))

// nodeReceiver is js/webhook-receiver.mjs: a receiver that verifies every
// delivery with npm standardwebhooks and records it in a file.
type nodeReceiver struct {
	t    *testing.T
	node string
	port int
	file string
	cmd  *exec.Cmd
}

// startReceiver starts the receiver on port (0: a free one).
func startReceiver(t *testing.T, node, file string, port int) *nodeReceiver {
	t.Helper()
	r := &nodeReceiver{t: t, node: node, file: file}
	r.cmd = exec.Command(node, "webhook-receiver.mjs", strconv.Itoa(port), file)
	r.cmd.Dir = "js"
	r.cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+e2eWebhookSecret)
	r.cmd.Stderr = os.Stderr
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, perr := fmt.Sscanf(line, "listening %d", &r.port); err != nil || perr != nil {
		t.Fatalf("receiver: %q %v %v", line, err, perr)
	}
	return r
}

// stop kills the receiver by its PID and waits for it.
func (r *nodeReceiver) stop() {
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}

func (r *nodeReceiver) url() string { return fmt.Sprintf("http://127.0.0.1:%d/hook", r.port) }

type receivedLine struct {
	OK      bool   `json:"ok"`
	Why     string `json:"why"`
	ID      string `json:"id"`
	Type    string `json:"type"`
	TaskID  string `json:"taskId"`
	Payload struct {
		Data struct {
			Status     string `json:"status"`
			ConsoleURL string `json:"consoleUrl"`
			Input      *struct {
				Method string `json:"method"`
			} `json:"input"`
			Result *struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		} `json:"data"`
	} `json:"payload"`
}

// lines are what the receiver recorded, in arrival order.
func (r *nodeReceiver) lines() []receivedLine {
	data, _ := os.ReadFile(r.file)
	var out []receivedLine
	for l := range bytes.Lines(data) {
		var rl receivedLine
		if json.Unmarshal(l, &rl) == nil {
			out = append(out, rl)
		}
	}
	return out
}

// ensureReceiverJS makes sure js/node_modules has standardwebhooks.
func ensureReceiverJS(t *testing.T) string {
	t.Helper()
	node := ensureJS(t)
	if _, err := os.Stat(filepath.Join("js", "node_modules", "standardwebhooks", "package.json")); err == nil {
		return node
	}
	jsMu.Lock()
	defer jsMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = "js"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in e2e/js: %v\n%s", err, out)
	}
	return node
}

// deliveredCount sums taskgate_webhook_deliveries_total{outcome} over
// the replicas' /metrics.
func deliveredCount(t *testing.T, bases []string, outcome string) int {
	t.Helper()
	total := 0
	for _, b := range bases {
		resp, err := http.Get(b + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for l := range strings.Lines(string(body)) {
			if strings.HasPrefix(l, "taskgate_webhook_deliveries_total{") && strings.Contains(l, `outcome="`+outcome+`"`) {
				f := strings.Fields(l)
				n, _ := strconv.ParseFloat(f[len(f)-1], 64)
				total += int(n)
			}
		}
	}
	return total
}

func waitWebhooks(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
	}
}

// TestWebhooks: two replicas on a real redis-server deliver the events of
// tasks of every outcome to a node receiver that verifies each with npm
// standardwebhooks: one delivery per event id, in order per task, none
// refused. The receiver down, then up: everything delivered, in order.
func TestWebhooks(t *testing.T) {
	node := ensureReceiverJS(t)
	file := filepath.Join(t.TempDir(), "received.jsonl")
	rcv := startReceiver(t, node, file, 0)

	// The receiver refuses what is not signed right: were it lax, the
	// checks below would prove nothing.
	probes := map[string]http.Header{
		"unsigned":     {"Webhook-Id": {"evt_x_1"}, "Webhook-Timestamp": {strconv.FormatInt(time.Now().Unix(), 10)}},
		"wrong secret": {"Webhook-Id": {"evt_x_1"}, "Webhook-Timestamp": {strconv.FormatInt(time.Now().Unix(), 10)}, "Webhook-Signature": {"v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}},
	}
	for name, h := range probes {
		req, _ := http.NewRequest("POST", rcv.url(), strings.NewReader(`{"type":"x","data":{}}`))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 400 {
			t.Fatalf("%s delivery: %v %v, want 400", name, resp, err)
		}
		resp.Body.Close()
	}
	refusedBefore := len(rcv.lines())

	rec := &testupstream.Recorder{}
	up := newUpstream(t, testupstream.Options{Stateless: true, Recorder: rec})
	redisURL := "redis://" + redistest.Start(t)
	flags := append(append([]string{}, twoReplicaFlags...), "--redis-url", redisURL,
		"--webhook-url", rcv.url(), "--webhook-secret", e2eWebhookSecret, "--console-url", "http://console.test",
		"--webhook-timeout", "2s")
	a, b := startGateway(t, up, flags...), startGateway(t, up, flags...)
	bases := []string{a.base, b.base}
	c := newMClient(t, []string{a.URL, b.URL}, "Bearer alice", true)

	want := map[string][]string{} // task -> event types, in order
	done := func(id string, types ...string) { want[id] = types }
	fail := c.createTask(replicaA, "fail", map[string]any{})
	rpc := c.createTask(replicaB, "rpcerror", map[string]any{})
	slow := c.createTask(replicaA, "slow", map[string]any{"seconds": 30, "text": "x"})
	elicit := c.createTask(replicaB, "elicit", map[string]any{})
	c.waitTask(replicaB, fail.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	c.waitTask(replicaA, rpc.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	c.cancel(replicaB, slow.TaskID)
	c.waitStatus(replicaA, elicit.TaskID, "input_required")
	c.update(replicaA, elicit.TaskID, map[string]any{"1": accept("name", "Ada")})
	c.waitTask(replicaB, elicit.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	done(fail.TaskID, "task.created", "task.completed") // isError is completed (2026-07-28)
	done(rpc.TaskID, "task.created", "task.failed")
	done(slow.TaskID, "task.created", "task.cancelled")
	done(elicit.TaskID, "task.created", "task.input_required", "task.completed")
	total := func() int {
		n := 0
		for _, ts := range want {
			n += len(ts)
		}
		return n
	}
	waitWebhooks(t, "every event delivered and recorded", 30*time.Second, func() bool {
		return len(rcv.lines())-refusedBefore >= total() && deliveredCount(t, bases, "delivered") >= total()
	})
	checkReceived(t, rcv, refusedBefore, want)
	for _, l := range rcv.lines() {
		if l.TaskID == fail.TaskID && l.Type == "task.completed" && (l.Payload.Data.Result == nil || !l.Payload.Data.Result.IsError) {
			t.Errorf("the tool error's task.completed says isError false: %+v", l.Payload.Data)
		}
	}

	// The receiver down: deliveries fail and are retried; back up on the
	// same port, everything arrives, in order per task.
	rcv.stop()
	var later []string
	for i := range 3 {
		tk := c.createTask(i%2, "slow", map[string]any{"seconds": 0, "text": "x"})
		c.waitTask(replicaA, tk.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
		later = append(later, tk.TaskID)
		done(tk.TaskID, "task.created", "task.completed")
	}
	waitWebhooks(t, "a delivery retried", 20*time.Second, func() bool { return deliveredCount(t, bases, "retried") > 0 })
	rcv = startReceiver(t, node, file, rcv.port)
	waitWebhooks(t, "every event delivered after the receiver came back", 45*time.Second, func() bool {
		return len(rcv.lines())-refusedBefore >= total() && deliveredCount(t, bases, "delivered") >= total()
	})
	checkReceived(t, rcv, refusedBefore, want)
	if n := deliveredCount(t, bases, "dead"); n != 0 {
		t.Errorf("%d dead letters", n)
	}
}

// checkReceived: nothing refused since the probes, one delivery per event
// id, each task's events in order, and the payloads as the issue says.
func checkReceived(t *testing.T, rcv *nodeReceiver, refusedBefore int, want map[string][]string) {
	t.Helper()
	lines := rcv.lines()
	ids := map[string]int{}
	got := map[string][]string{}
	for i, l := range lines {
		if !l.OK {
			if i >= refusedBefore {
				t.Errorf("the receiver refused a delivery: %s", l.Why)
			}
			continue
		}
		ids[l.ID]++
		got[l.TaskID] = append(got[l.TaskID], l.Type)
		d := l.Payload.Data
		if d.ConsoleURL != "http://console.test/tasks/"+l.TaskID {
			t.Errorf("%s: consoleUrl %q", l.ID, d.ConsoleURL)
		}
		if l.Type == "task.input_required" && (d.Input == nil || d.Input.Method != "elicitation/create") {
			t.Errorf("%s: input %+v", l.ID, d.Input)
		}
		if (l.Type == "task.completed" || l.Type == "task.failed") && d.Result == nil {
			t.Errorf("%s: no result metadata", l.ID)
		}
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	for task, types := range want {
		if strings.Join(got[task], " ") != strings.Join(types, " ") {
			t.Errorf("task %s: received %v, want %v", task, got[task], types)
		}
	}
}
