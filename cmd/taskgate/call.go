package main

// taskgate call: a one-shot MCP client, the line that proves a deployment
// works. It speaks MCP 2025-11-25 over Streamable HTTP (a session, and
// the task-augmented tools/call of that revision's Tasks section), the
// revision every gateway replica serves whatever its upstream speaks.
// Status changes go to stderr (a live line on a terminal,
// callprogress.go), the result to stdout.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/upstream"
)

// callVersion is the protocol revision taskgate call speaks.
const callVersion = "2025-11-25"

// Exit statuses of taskgate call.
const (
	callFailed    = 1 // the tool answered with isError, or the task failed or was cancelled
	callNotCalled = 2 // no answer: bad arguments, unreachable, refused, not MCP
)

func callCommand() *cli.Command {
	return &cli.Command{
		Name:      "call",
		Usage:     "call one tool through a gateway (or any MCP server) and print its result; --task runs it as a task",
		UsageText: "taskgate call URL TOOL [key=value...] [--task] [--header 'Name: value']... [--ca FILE] [--timeout D]",
		Description: "Speaks MCP " + callVersion + ": it initializes a session, sends tools/call with the arguments " +
			"(a value that parses as JSON is sent as JSON, e.g. seconds=3 or tags='[\"a\"]'; any other as a string), " +
			"and prints the result's text. With --task the call is task-augmented: it prints each status change to stderr, " +
			"then the result; when stderr is a terminal, one live line with the elapsed time, the status and its message, " +
			"and a progress bar when the tool reports progress with a total. Requests for input (elicitation, sampling) are declined, and it says so. " +
			"Exit status: 0 the tool succeeded; 1 it answered with an error, or the task failed or was cancelled; " +
			"2 no answer (bad arguments, unreachable, refused, not an MCP endpoint). Flags may come anywhere.",
		// Flags may follow the arguments (taskgate call URL TOOL x=1 --task),
		// which urfave/cli's parser does not allow: callArgs parses them.
		SkipFlagParsing: true,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "task", Usage: "run the call as a task: print its status changes, then its result"},
			&cli.StringSliceFlag{Name: "header", Usage: "`'Name: value'` header sent on every request, e.g. 'Authorization: Bearer …' (repeatable)"},
			&cli.StringFlag{Name: "ca", TakesFile: true, Usage: "PEM `FILE` of the CA certificates that sign an https URL's certificate (default: the system's)"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Minute, Usage: "how long the whole call may take"},
		},
		Action: call,
	}
}

// callOpts are taskgate call's arguments.
type callOpts struct {
	url, tool string
	args      map[string]any
	task      bool
	header    http.Header
	tls       *tls.Config // from --ca; nil: the system's CAs
	timeout   time.Duration
}

// headerList collects repeated --header values.
type headerList []string

func (h *headerList) String() string     { return strings.Join(*h, ", ") }
func (h *headerList) Set(v string) error { *h = append(*h, v); return nil }

// callArgs reads the arguments and flags, in any order.
func callArgs(args []string) (callOpts, bool, error) {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	task := fs.Bool("task", false, "")
	timeout := fs.Duration("timeout", 10*time.Minute, "")
	help := fs.Bool("help", false, "")
	fs.BoolVar(help, "h", false, "")
	var headers headerList
	fs.Var(&headers, "header", "")
	ca := fs.String("ca", "", "")
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
				name = strings.TrimLeft(name, "-")
				if s := didYouMean(name, []string{"task", "header", "ca", "timeout", "help"}); s != "" {
					return callOpts{}, false, fmt.Errorf("unknown flag --%s: did you mean --%s? (see taskgate call --help)", name, s)
				}
				return callOpts{}, false, fmt.Errorf("unknown flag --%s (see taskgate call --help)", name)
			}
			return callOpts{}, false, fmt.Errorf("%v (see taskgate call --help)", err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *help {
		return callOpts{}, true, nil
	}
	o := callOpts{task: *task, timeout: *timeout, args: map[string]any{}}
	if len(pos) < 2 {
		return o, false, errors.New("want the gateway's MCP URL and a tool name: taskgate call http://127.0.0.1:8080/mcp TOOL [key=value...] (see taskgate call --help)")
	}
	o.url, o.tool = pos[0], pos[1]
	if _, err := upstream.ParseURL(o.url); err != nil {
		return o, false, fmt.Errorf("invalid URL: %s", strings.TrimPrefix(err.Error(), "upstream "))
	}
	for _, kv := range pos[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return o, false, fmt.Errorf("invalid argument %q: want key=value, e.g. seconds=3 or text=hello", kv)
		}
		var j any
		if json.Unmarshal([]byte(v), &j) == nil {
			o.args[k] = j
		} else {
			o.args[k] = v
		}
	}
	if *timeout <= 0 {
		return o, false, fmt.Errorf("invalid --timeout %s: it must be positive", *timeout)
	}
	var err error
	if o.header, err = headerFlag(headers); err != nil {
		return o, false, err
	}
	if *ca != "" {
		if o.tls, err = caTLSConfig(*ca, "--ca"); err != nil {
			return o, false, err
		}
	}
	return o, false, nil
}

func call(c *cli.Context) error {
	o, help, err := callArgs(c.Args().Slice())
	if help {
		_, err := fmt.Fprint(c.App.Writer, commandHelpText(c.Command))
		return err
	}
	if err != nil {
		return cli.Exit(err.Error(), callNotCalled)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cl := &caller{out: c.App.Writer, log: c.App.ErrWriter, opts: o, tty: terminal(c.App.ErrWriter)}
	return cl.run(ctx)
}

// caller is one run of taskgate call.
type caller struct {
	out, log io.Writer
	opts     callOpts
	up       *upstream.Client
	sess     *upstream.Session
	seq      atomic.Int64 // request ids; tasks/result and tasks/get overlap on a terminal
	tty      *os.File     // stderr when it is a terminal: a live line (callprogress.go)
	live     *liveLine    // that line while a task runs
}

func (cl *caller) run(ctx context.Context) error {
	up, err := upstream.New(cl.opts.url, upstream.Options{TLSConfig: cl.opts.tls})
	if err != nil {
		return cli.Exit(err.Error(), callNotCalled)
	}
	cl.up = up
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": callVersion,
		"capabilities":    map[string]any{}, // no elicitation, no sampling: we cannot answer them
		"clientInfo":      map[string]any{"name": "taskgate-call", "version": buildVersion()},
	})
	sess, res, err := up.Initialize(ctx, cl.opts.header, params)
	if err != nil {
		return cl.notCalled("initialize", err)
	}
	cl.sess = sess
	defer func() { _ = up.CloseSession(context.WithoutCancel(ctx), sess) }()
	fmt.Fprintf(cl.log, "taskgate call: MCP %s session with %s\n", res.ProtocolVersion, up.URL())
	p := map[string]any{"name": cl.opts.tool, "arguments": cl.opts.args}
	if cl.opts.task {
		p["task"] = map[string]any{}
	}
	if cl.opts.task && cl.tty != nil {
		// Progress is sent only for a request that carries a
		// progressToken (Basic/Utilities, "Progress").
		p["_meta"] = map[string]any{"progressToken": "taskgate-call"}
	}
	resp, err := cl.request(ctx, "tools/call", p)
	if err != nil {
		return cl.notCalled("tools/call", err)
	}
	if !cl.opts.task {
		return cl.printResult(resp)
	}
	var created struct {
		Task taskView `json:"task"`
	}
	if err := json.Unmarshal(resp, &created); err != nil || created.Task.TaskID == "" {
		return cli.Exit(fmt.Sprintf("tools/call with --task: the answer is no task: %s", clip(resp)), callNotCalled)
	}
	if cl.tty != nil {
		return cl.followLive(ctx, created.Task)
	}
	return cl.follow(ctx, created.Task)
}

// taskView is the part of a 2025-11-25 Task taskgate call reads.
type taskView struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	PollInterval  int64  `json:"pollInterval"`
}

func (t taskView) terminal() bool {
	return t.Status == "completed" || t.Status == "failed" || t.Status == "cancelled"
}

// follow polls the task (tasks/get, at its pollInterval), printing every
// status change, until it ends; then prints tasks/result. A task that
// asks for input is sent tasks/result at once, which carries the requests
// (MCP 2025-11-25, Tasks, "Input Required Status"): they are declined.
func (cl *caller) follow(ctx context.Context, t taskView) error {
	last := ""
	for {
		if line := t.Status + statusNote(t.StatusMessage); line != last {
			fmt.Fprintf(cl.log, "task %s: %s\n", t.TaskID, line)
			last = line
		}
		if t.terminal() || t.Status == "input_required" {
			break
		}
		wait := time.Duration(max(t.PollInterval, 100)) * time.Millisecond
		select {
		case <-ctx.Done():
			return cl.abandon(t.TaskID, ctx.Err())
		case <-time.After(wait):
		}
		raw, err := cl.request(ctx, "tasks/get", map[string]any{"taskId": t.TaskID})
		if err != nil {
			if ctx.Err() != nil {
				return cl.abandon(t.TaskID, ctx.Err())
			}
			return cl.notCalled("tasks/get", err)
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return cli.Exit("tasks/get: "+err.Error(), callNotCalled)
		}
	}
	result, err := cl.request(ctx, "tasks/result", map[string]any{"taskId": t.TaskID})
	return cl.end(ctx, t, result, err, func(t taskView) {
		if line := t.Status + statusNote(t.StatusMessage); line != last {
			fmt.Fprintf(cl.log, "task %s: %s\n", t.TaskID, line)
		}
	})
}

// end turns tasks/result's answer into the exit. A task that was not yet
// terminal (it asked for input; tasks/result waited for its end) is asked
// for its final status, which show is given.
func (cl *caller) end(ctx context.Context, t taskView, result json.RawMessage, err error, show func(taskView)) error {
	if err != nil && ctx.Err() != nil {
		return cl.abandon(t.TaskID, ctx.Err())
	}
	var rpcErr *jsonrpc.Error
	if err != nil && !errors.As(err, &rpcErr) {
		return cl.notCalled("tasks/result", err)
	}
	if !t.terminal() {
		if raw, err := cl.request(ctx, "tasks/get", map[string]any{"taskId": t.TaskID}); err == nil && json.Unmarshal(raw, &t) == nil {
			show(t)
		}
	}
	if rpcErr != nil { // a failed or cancelled task's tasks/result is its error
		return cli.Exit(fmt.Sprintf("task %s %s: %s", t.TaskID, t.Status, rpcErr.Message), callFailed)
	}
	if t.Status != "completed" {
		_ = cl.printResult(result)
		return cli.Exit(fmt.Sprintf("task %s %s", t.TaskID, t.Status), callFailed)
	}
	return cl.printResult(result)
}

func statusNote(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

// abandon cancels the task when the call is interrupted or times out.
func (cl *caller) abandon(id string, why error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cancelled := ""
	if _, err := cl.request(ctx, "tasks/cancel", map[string]any{"taskId": id}); err == nil {
		cancelled = "; cancelled it"
	}
	reason := "interrupted"
	if errors.Is(why, context.DeadlineExceeded) {
		reason = "no result within --timeout " + cl.opts.timeout.String()
	}
	return cli.Exit(fmt.Sprintf("task %s: %s%s", id, reason, cancelled), callFailed)
}

// request sends one request on the session and returns its result; a
// JSON-RPC error comes back as a *jsonrpc.Error. Requests the server
// sends meanwhile are declined, and said so.
func (cl *caller) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return cl.requestNoting(ctx, method, params, nil)
}

// requestNoting is request, with the notifications sent on the request's
// stream given to onNote (nil: dropped).
func (cl *caller) requestNoting(ctx context.Context, method string, params any, onNote func(*jsonrpc.Request)) (json.RawMessage, error) {
	raw, _ := json.Marshal(params)
	id, _ := jsonrpc.MakeID(fmt.Sprintf("taskgate-call-%d", cl.seq.Add(1)))
	resp, err := cl.up.Call(ctx, cl.sess, &jsonrpc.Request{ID: id, Method: method, Params: raw}, upstream.CallOptions{
		OnRequest: func(r *jsonrpc.Request) {
			cl.say(fmt.Sprintf("the server asks for %s, which taskgate call cannot answer: declined", r.Method))
			_ = cl.up.Respond(ctx, cl.sess, &jsonrpc.Response{ID: r.ID, Error: &jsonrpc.Error{
				Code: jsonrpc.CodeMethodNotFound, Message: "taskgate call cannot answer " + r.Method}})
		},
		OnNotification: onNote,
	})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		var we *jsonrpc.Error
		if errors.As(resp.Error, &we) {
			return nil, we
		}
		return nil, resp.Error
	}
	return resp.Result, nil
}

// say prints a line to stderr, above the live line if there is one.
func (cl *caller) say(line string) {
	if cl.live != nil {
		cl.live.say(line)
		return
	}
	fmt.Fprintln(cl.log, line)
}

// notCalled is the exit of a request that got no usable answer, naming
// the fix where there is a likely one.
func (cl *caller) notCalled(method string, err error) error {
	// The client's package calls its peer "the upstream"; here it is
	// the server taskgate call talks to.
	msg := method + ": " + strings.Replace(err.Error(), "the upstream", "the server", 1)
	var se *upstream.StatusError
	if errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed) && method == "initialize" {
		if u, perr := url.Parse(cl.opts.url); perr == nil && (u.Path == "" || u.Path == "/") {
			msg += "; " + upstream.PathHint(cl.opts.url)
		} else if perr == nil {
			// A gateway relays its upstream's answers as they are: a
			// gateway whose --upstream is wrong answers 404 too.
			u.Path, u.RawQuery = "", ""
			msg += fmt.Sprintf("; check the URL's path, or, if it is a taskgate gateway, its --upstream (its log says; so does taskgate healthcheck --url %s)", u.Redacted())
		}
	}
	if upstream.Fault(err) == upstream.FaultTLS {
		msg += "; the server's certificate is " + upstream.CertificateWhy(err) + ": give the CA that signs it with --ca FILE (PEM)"
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) && cl.opts.task && method == "tools/call" && we.Code == jsonrpc.CodeMethodNotFound {
		msg += " (the gateway runs a tool as a task only when a rule allows it: serve --task " + cl.opts.tool + ")"
	}
	return cli.Exit(msg, callNotCalled)
}

// printResult prints a CallToolResult: its text contents, one per line
// (other contents, and structured content without text, as JSON). A
// result with isError is the exit status 1.
func (cl *caller) printResult(raw json.RawMessage) error {
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return cli.Exit("the result is no CallToolResult: "+clip(raw), callNotCalled)
	}
	var items []json.RawMessage
	_ = json.Unmarshal(mustField(raw, "content"), &items)
	printed := false
	for i, c := range res.Content {
		if c.Type == "text" {
			fmt.Fprintln(cl.out, c.Text)
		} else if i < len(items) {
			fmt.Fprintln(cl.out, string(items[i]))
		}
		printed = true
	}
	if !printed && len(res.StructuredContent) > 0 {
		fmt.Fprintln(cl.out, string(res.StructuredContent))
	}
	if res.IsError {
		return cli.Exit("the tool answered with an error (isError)", callFailed)
	}
	return nil
}

// mustField is raw's field name, or nil.
func mustField(raw json.RawMessage, name string) json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	return m[name]
}

// clip shortens raw for a message.
func clip(raw []byte) string {
	if len(raw) > 200 {
		return string(raw[:200]) + "…"
	}
	return string(raw)
}
