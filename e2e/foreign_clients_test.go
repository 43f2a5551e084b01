package e2e

// Clients nobody here wrote (go-sdk v1.8.0's, mcp-go's newest), each
// against a session and a stateless upstream, through taskgate and
// directly: the same tool list, the same call results, and the upstream's
// tool list change heard (issue 28, item 4).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	mgclient "github.com/mark3labs/mcp-go/client"
	mgtransport "github.com/mark3labs/mcp-go/client/transport"
	mg "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// clientView is what a client saw of an upstream: comparable between
// direct and through the gateway.
type clientView struct {
	Tools    []string // name: description, sorted
	Echo     string   // echo's text
	Fail     string   // fail's text, and that it was isError
	Grown    bool     // tools/list after grow lists the grown tool
	Notified bool     // notifications/tools/list_changed reached the client
}

// foreignUpstreams are the two upstream kinds, with the grow tool.
var foreignUpstreams = []struct {
	name string
	opts testupstream.Options
}{
	{"session-upstream", testupstream.Options{ListChanged: true}},
	{"stateless-upstream", testupstream.Options{Stateless: true, ListChanged: true}},
}

// growUntilNotified calls grow until notified fires: a change made before
// the client's notification stream is open is not delivered, by any
// server. It reports whether it fired before ctx ended.
func growUntilNotified(ctx context.Context, grow func(context.Context) error, notified <-chan struct{}) bool {
	for {
		if err := grow(ctx); err != nil {
			return false
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-notified:
			t.Stop()
			return true
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// viewGo is what go-sdk's client at version ("" its default) sees of url,
// with a ToolListChangedHandler when listen (then it waits for the
// notification).
func viewGo(t *testing.T, url, version string, listen bool) clientView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	notified := make(chan struct{}, 16)
	opts := &mcp.ClientOptions{}
	if listen {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case notified <- struct{}{}:
			default:
			}
		}
	}
	cs := connectGoHung(t, ctx, url, version, opts)
	defer cs.Close()
	return observe(t, ctx, clientOps{
		list: func() ([]string, error) {
			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				return nil, err
			}
			return toolLines(res.Tools, func(t *mcp.Tool) string { return t.Name + ": " + t.Description }), nil
		},
		call: func(name string, args map[string]any) (string, error) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				return "", err
			}
			tc, _ := res.Content[0].(*mcp.TextContent)
			if tc == nil {
				return "", fmt.Errorf("content %+v", res.Content)
			}
			return tc.Text + map[bool]string{true: " (isError)"}[res.IsError], nil
		},
	}, notified, listen)
}

// toolLines is tools as line renders each.
func toolLines[T any](tools []T, line func(T) string) []string {
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		out = append(out, line(t))
	}
	return out
}

// clientOps are one client's tools/list (each tool as "name: description")
// and tools/call (the text, " (isError)" added when it is one).
type clientOps struct {
	list func() ([]string, error)
	call func(name string, args map[string]any) (string, error)
}

// observe is what a client sees through ops: the tools, the echo and fail
// calls, and after grow the tool list again; when listen it calls grow
// until notified fires.
func observe(t *testing.T, ctx context.Context, ops clientOps, notified <-chan struct{}, listen bool) clientView {
	t.Helper()
	list := func() []string {
		out, err := ops.list()
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		slices.Sort(out)
		return out
	}
	call := func(name string, args map[string]any) string {
		text, err := ops.call(name, args)
		if err != nil {
			t.Fatalf("tools/call %s: %v", name, err)
		}
		return text
	}
	var v clientView
	v.Tools = list()
	v.Echo = call("echo", map[string]any{"text": "same both ways"})
	v.Fail = call("fail", map[string]any{})
	grow := func(context.Context) error { call("grow", map[string]any{}); return nil }
	if listen {
		v.Notified = growUntilNotified(ctx, grow, notified)
	} else {
		_ = grow(ctx)
	}
	v.Grown = slices.Contains(list(), testupstream.GrownTool+": Added by grow.")
	return v
}

// connectGoHung connects go-sdk's client with opts at version. Connect
// does not give up when ctx ends while its subscriptions/listen waits for
// an answer (go-sdk v1.8.0): it runs apart, so that a hang fails the test
// rather than stalling the suite.
func connectGoHung(t *testing.T, ctx context.Context, url, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-go", Version: "1"}, opts)
	type connected struct {
		cs  *mcp.ClientSession
		err error
	}
	ch := make(chan connected, 1)
	go func() {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: version})
		ch <- connected{cs, err}
	}()
	select {
	case c := <-ch:
		if c.err != nil {
			t.Fatalf("connect %s: %v", url, c.err)
		}
		return c.cs
	case <-ctx.Done():
		t.Fatalf("connect %s: no session before the deadline", url)
	}
	return nil
}

// TestGoSDKListenStdioChild: go-sdk's client at its default version with a
// ToolListChangedHandler connects through taskgate in front of a stdio
// child (its subscriptions/listen used to get 404 -32601).
func TestGoSDKListenStdioChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	g := startGateway(t, stdioUpstream(t))
	cs := connectGoHung(t, ctx, g.URL, "", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("negotiated %q, want 2026-07-28", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "via a child"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	if tc, _ := res.Content[0].(*mcp.TextContent); tc == nil || tc.Text != "via a child" {
		t.Errorf("echo = %+v", res.Content)
	}
}

// TestGoSDKClientsThroughGateway: go-sdk v1.8.0's client at its default
// version (2026-07-28) with and without a list-changed handler, and at
// 2025-11-25, sees the same through taskgate as directly, in front of a
// session and a stateless upstream. Through taskgate in front of a session
// upstream the default client with a handler used to hang at Connect
// (its subscriptions/listen got no answer).
func TestGoSDKClientsThroughGateway(t *testing.T) {
	variants := []struct {
		name, version string
		listen        bool
	}{
		{"default", "", false},
		{"default-listchanged", "", true},
		{"2025-11-25-listchanged", "2025-11-25", true},
	}
	for _, up := range foreignUpstreams {
		for _, vr := range variants {
			t.Run(up.name+"/"+vr.name, func(t *testing.T) {
				t.Parallel()
				// A stateless server has no way to notify a 2025-11-25
				// client (no GET stream); through taskgate it has (the
				// session's GET stream is fed by the upstream's listen).
				hears := !(up.opts.Stateless && vr.version == "2025-11-25")
				direct := viewGo(t, newUpstream(t, up.opts), vr.version, vr.listen && hears)
				via := viewGo(t, startGateway(t, newUpstream(t, up.opts)).URL, vr.version, vr.listen)
				compareViews(t, direct, via, vr.listen)
			})
		}
	}
}

func compareViews(t *testing.T, direct, via clientView, listen bool) {
	t.Helper()
	if !slices.Equal(direct.Tools, via.Tools) {
		t.Errorf("tools/list through taskgate %q, directly %q", via.Tools, direct.Tools)
	}
	if direct.Echo != via.Echo || direct.Fail != via.Fail {
		t.Errorf("calls through taskgate %q, %q; directly %q, %q", via.Echo, via.Fail, direct.Echo, direct.Fail)
	}
	if !direct.Grown || !via.Grown {
		t.Errorf("the grown tool listed: directly %v, through taskgate %v", direct.Grown, via.Grown)
	}
	if listen && !via.Notified {
		t.Errorf("notifications/tools/list_changed not heard through taskgate (directly: %v)", direct.Notified)
	}
}

// mgConnect connects mcp-go's client to url at version ("" its default,
// 2026-07-28), declaring the 2025-11-25 tasks capability.
func mgConnect(t *testing.T, ctx context.Context, url, version string) *mgclient.Client {
	t.Helper()
	var topts []mgtransport.StreamableHTTPCOption
	if version != "" {
		// 2025-11-25: notifications come on the session's GET stream.
		topts = append(topts, mgtransport.WithContinuousListening())
	}
	tr, err := mgtransport.NewStreamableHTTP(url, topts...)
	if err != nil {
		t.Fatal(err)
	}
	var copts []mgclient.ClientOption
	if version != "" {
		copts = append(copts, mgclient.WithProtocolVersion(version))
	}
	c := mgclient.NewClient(tr, copts...)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	init := mg.InitializeRequest{}
	init.Params.ClientInfo = mg.Implementation{Name: "e2e-mcp-go", Version: "1"}
	init.Params.ProtocolVersion = version
	init.Params.Capabilities.Tasks = &mg.TasksCapability{List: &struct{}{}, Cancel: &struct{}{}}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize %s: %v", url, err)
	}
	return c
}

func mgText(t *testing.T, what string, content []mg.Content, isErr bool) string {
	t.Helper()
	if len(content) == 0 {
		t.Fatalf("%s: no content", what)
	}
	tc, ok := mg.AsTextContent(content[0])
	if !ok {
		t.Fatalf("%s: %+v", what, content)
	}
	return tc.Text + map[bool]string{true: " (isError)"}[isErr]
}

// viewMcpGo is what mcp-go's client at version sees of url; it waits for
// the tool list change when listen.
func viewMcpGo(t *testing.T, url, version string, listen bool) clientView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	c := mgConnect(t, ctx, url, version)
	notified := make(chan struct{}, 16)
	c.OnNotification(func(n mg.JSONRPCNotification) {
		if n.Method == "notifications/tools/list_changed" {
			select {
			case notified <- struct{}{}:
			default:
			}
		}
	})
	if version == "" {
		lctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = c.Listen(lctx, mg.SubscriptionFilter{ToolsListChanged: true})
		}()
		defer func() { stop(); <-done }()
	}
	return observe(t, ctx, clientOps{
		list: func() ([]string, error) {
			res, err := c.ListTools(ctx, mg.ListToolsRequest{})
			if err != nil {
				return nil, err
			}
			return toolLines(res.Tools, func(t mg.Tool) string { return t.Name + ": " + t.Description }), nil
		},
		call: func(name string, args map[string]any) (string, error) {
			req := mg.CallToolRequest{}
			req.Params.Name = name
			req.Params.Arguments = args
			res, err := c.CallTool(ctx, req)
			if err != nil {
				return "", err
			}
			return mgText(t, name, res.Content, res.IsError), nil
		},
	}, notified, listen)
}

// TestMcpGoClientThroughGateway: mcp-go's client, at its default version
// (2026-07-28) and at 2025-11-25, sees the same through taskgate as
// directly, in front of a session and a stateless upstream.
//
// Directly, mcp-go v1.2.1 at its default cannot use a go-sdk session
// server (its server/discover offers no 2026-07-28, yet the client sends
// tools/list at 2026-07-28 and gets "unsupported protocol version"), so
// there the baseline is the same client at 2025-11-25 directly.
func TestMcpGoClientThroughGateway(t *testing.T) {
	for _, up := range foreignUpstreams {
		for _, version := range []string{"", "2025-11-25"} {
			name := version
			if name == "" {
				name = "default"
			}
			t.Run(up.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				baseline := version
				if baseline == "" && !up.opts.Stateless {
					baseline = "2025-11-25"
				}
				hears := !(up.opts.Stateless && baseline == "2025-11-25") // as for go-sdk's client
				direct := viewMcpGo(t, newUpstream(t, up.opts), baseline, hears)
				via := viewMcpGo(t, startGateway(t, newUpstream(t, up.opts)).URL, version, true)
				compareViews(t, direct, via, true)
			})
		}
	}
}

// TestMcpGoTaskAPI: mcp-go's 2025-11-25 task API through taskgate, in
// front of a session and a stateless upstream: a task-augmented call of a
// --task tool (sent raw: mcp-go's CallTool reads only plain results) gives
// a task that GetTask and ListTasks show, WaitForTask sees end, and whose
// TaskResult is the plain call's result; CancelTask cancels a running one.
func TestMcpGoTaskAPI(t *testing.T) {
	for _, up := range foreignUpstreams {
		t.Run(up.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard
			defer cancel()
			gw := startGateway(t, newUpstream(t, up.opts), "--task", "echo", "--task", "slow", "--poll-interval", "100ms")
			c := mgConnect(t, ctx, gw.URL, "2025-11-25")

			plain := mg.CallToolRequest{}
			plain.Params.Name = "echo"
			plain.Params.Arguments = map[string]any{"text": "as a task"}
			res, err := c.CallTool(ctx, plain)
			if err != nil {
				t.Fatal(err)
			}
			want := mgText(t, "plain echo", res.Content, res.IsError)

			create := func(id, tool string, args map[string]any) mg.Task {
				resp, err := c.GetTransport().SendRequest(ctx, mgtransport.JSONRPCRequest{JSONRPC: "2.0", ID: mg.NewRequestId(id),
					Method: "tools/call", Params: map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 60000}}})
				if err != nil || resp.Error != nil {
					t.Fatalf("task-augmented %s: %v %+v", tool, err, resp)
				}
				var r mg.CreateTaskResult
				if err := json.Unmarshal(resp.Result, &r); err != nil || r.Task.TaskId == "" {
					t.Fatalf("task-augmented %s: %s, want a CreateTaskResult", tool, resp.Result)
				}
				return r.Task
			}
			task := create("t1", "echo", map[string]any{"text": "as a task"})
			got, err := c.GetTask(ctx, mg.GetTaskRequest{Params: mg.GetTaskParams{TaskId: task.TaskId}})
			if err != nil || got.TaskId != task.TaskId {
				t.Fatalf("GetTask: %+v, %v", got, err)
			}
			end, err := c.WaitForTask(ctx, mg.GetTaskRequest{Params: mg.GetTaskParams{TaskId: task.TaskId}}, 50*time.Millisecond)
			if err != nil || end.Status != mg.TaskStatusCompleted {
				t.Fatalf("WaitForTask: %+v, %v", end, err)
			}
			result, err := c.TaskResult(ctx, mg.TaskResultRequest{Params: mg.TaskResultParams{TaskId: task.TaskId}})
			if err != nil {
				t.Fatal(err)
			}
			if got := mgText(t, "TaskResult", result.Content, result.IsError); got != want {
				t.Errorf("TaskResult = %q, the plain call's %q", got, want)
			}

			running := create("t2", "slow", map[string]any{"seconds": 30})
			listed, err := c.ListTasks(ctx, mg.ListTasksRequest{})
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			for _, tk := range listed.Tasks {
				ids[tk.TaskId] = true
			}
			if !ids[task.TaskId] || !ids[running.TaskId] {
				t.Errorf("ListTasks = %+v, want both tasks", listed.Tasks)
			}
			cancelled, err := c.CancelTask(ctx, mg.CancelTaskRequest{Params: mg.CancelTaskParams{TaskId: running.TaskId}})
			if err != nil || cancelled.Status != mg.TaskStatusCancelled {
				t.Fatalf("CancelTask: %+v, %v", cancelled, err)
			}
			end, err = c.WaitForTask(ctx, mg.GetTaskRequest{Params: mg.GetTaskParams{TaskId: running.TaskId}}, 50*time.Millisecond)
			if err != nil || end.Status != mg.TaskStatusCancelled {
				t.Errorf("after CancelTask: %+v, %v", end, err)
			}
		})
	}
}
