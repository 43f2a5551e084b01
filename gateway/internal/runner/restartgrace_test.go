package runner

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/taskstore"
)

// restartingUpstream is a 2025-11-25 MCP server with one tool it runs only
// as its own task (execution.taskSupport "required", MCP 2025-11-25,
// Tasks), on a port it can leave and come back to with its sessions and
// tasks kept: an upstream in a rolling restart, behind a stable address.
type restartingUpstream struct {
	t       *testing.T
	addr    string
	srv     *http.Server
	asked   chan struct{} // a tasks/result arrived
	done    atomic.Bool   // the task's result is ready
	cancels atomic.Int32  // tasks/cancel received
}

func startRestartingUpstream(t *testing.T) *restartingUpstream {
	t.Helper()
	u := &restartingUpstream{t: t, asked: make(chan struct{}, 64)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = ln.Addr().String()
	u.serve(ln)
	t.Cleanup(func() { _ = u.srv.Close() })
	return u
}

func (u *restartingUpstream) URL() string { return "http://" + u.addr + "/mcp" }

func (u *restartingUpstream) serve(ln net.Listener) {
	u.srv = &http.Server{Handler: http.HandlerFunc(u.handle)}
	go func() { _ = u.srv.Serve(ln) }()
}

// stop closes the port and every open connection (the tasks/result stream
// breaks with no answer); start listens on the same port again.
func (u *restartingUpstream) stop() { _ = u.srv.Close() }

func (u *restartingUpstream) start() {
	u.t.Helper()
	ln, err := net.Listen("tcp", u.addr)
	if err != nil {
		u.t.Fatalf("listen again on %s: %v", u.addr, err)
	}
	u.serve(ln)
}

func (u *restartingUpstream) handle(w http.ResponseWriter, r *http.Request) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if len(m.ID) == 0 { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	result := `{}`
	switch m.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "s1")
		result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"restarting","version":"0"}}`
	case "tools/list":
		result = `{"tools":[{"name":"native","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}]}`
	case "tools/call":
		now := time.Now().UTC().Format(time.RFC3339)
		result = `{"task":{"taskId":"up1","status":"working","createdAt":"` + now + `","lastUpdatedAt":"` + now + `","ttl":60000,"pollInterval":500}}`
	case "tasks/result":
		u.asked <- struct{}{}
		for !u.done.Load() { // held until the result is ready, or the stop cuts it
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		result = `{"content":[{"type":"text","text":"survived the restart"}]}`
	case "tasks/cancel":
		u.cancels.Add(1)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`))
}

// TestHeldUpstreamTaskSurvivesUpstreamRestart: a task held through the
// upstream's own task, whose upstream is unreachable for 5 s (its port
// closed, then open again with its tasks kept), completes with the
// upstream's result within the restart grace (10 s here), instead of
// failing after about 3 s of asking again as it did.
func TestHeldUpstreamTaskSurvivesUpstreamRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("a 5 s upstream outage")
	}
	up := startRestartingUpstream(t)
	rig := newStoreRigOn(t, up.URL(), false, taskstore.Options{}, Params{RestartGrace: 10 * time.Second})
	// The gateway's task, holding the upstream's (a task rule on a native
	// tool, as a 2025-11-25 client's task).
	params, err := WithUpstreamTask(json.RawMessage(`{"name":"native","arguments":{}}`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	slot, e := rig.rn.Admit(context.Background(), rigOwner, AdmitTask)
	if e != nil {
		t.Fatal(e)
	}
	j := &Job{Owner: rigOwner, Sess: rig.target.Session, Slot: slot,
		Req: &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: params}}
	if err := rig.rn.Launch(context.Background(), j, LaunchSpec{Proto: taskstore.Protocol2025, Tool: "native"}); err != nil {
		t.Fatal(err)
	}
	task := j.Task
	select {
	case <-up.asked:
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway never asked the upstream for its task's result")
	}
	up.stop()
	time.Sleep(5 * time.Second) // the outage (not an assertion): longer than the old 3 s of asking again
	up.done.Store(true)
	up.start()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wt, err := rig.store.WaitFor(ctx, rigOwner, task.ID, func(t *taskstore.Task) bool { return t.Status.Terminal() })
	if err != nil {
		t.Fatalf("the task never ended after the upstream came back: %v", err)
	}
	if wt.Status == taskstore.StatusFailed || wt.Status == taskstore.StatusCancelled {
		t.Fatalf("the task %s across the upstream's restart: %s", wt.Status, wt.StatusMessage)
	}
	if text, isErr, _ := gwtest.ResultText(t, wt.Result); len(wt.Error) != 0 || text != "survived the restart" || isErr {
		t.Errorf("result = %q isError=%v %s", text, isErr, wt.Error)
	}
	if n := up.cancels.Load(); n != 0 {
		t.Errorf("%d tasks/cancel sent to the upstream of a task that completed", n)
	}
}
