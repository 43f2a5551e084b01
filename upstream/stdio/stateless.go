package stdio

// A child that speaks MCP 2026-07-28 is served as a stateless upstream
// (SEP-2575): no initialize, every request carries its client's version,
// capabilities and identity in _meta, and the client's input is asked for
// with InputRequiredResult rounds (SEP-2322, MRTR) inside results, not with
// requests of the server. The Bridge then is the Streamable HTTP side of a
// stateless server (MCP 2026-07-28, Transports):
//
//	Start       one child is started and asked server/discover at
//	            2026-07-28, as SEP-2575 "Backward Compatibility" tells a stdio
//	            client to probe. A DiscoverResult that lists 2026-07-28 makes
//	            the bridge stateless, for its whole life; any other answer
//	            (an error, none within the probe timeout, an exit) stops that
//	            child and the bridge serves sessions as before, each child
//	            then initialized. With PerPrincipal there is no probe: the
//	            bridge serves sessions, for no child may serve two
//	            principals (principal.go).
//	POST        one request, its id rewritten to a bridge id (and its
//	            progressToken to a bridge token) so that concurrent requests
//	            of all clients never collide on the child's one stdin; the
//	            answer streams back under the client's id: application/json
//	            with the status the error code prescribes (400 for -32020,
//	            -32021, -32022…, 404 for -32601) when the answer comes first,
//	            an SSE stream when notifications come before it. An
//	            InputRequiredResult is an answer like any other: it passes
//	            untouched.
//	Mcp-Param-* validated against the tool's x-mcp-header annotations
//	            (stateless_headers.go): a stdio server never sees HTTP
//	            headers, so the bridge checks them as the HTTP server would.
//	listen      subscriptions/listen is a request like the others; the
//	            child's notifications that name it in
//	            _meta.subscriptionId go to its stream under the client's id;
//	            progress goes to the call its token names; any other
//	            notification names no client and is dropped.
//	cancel      a client that goes away cancels its request
//	            (notifications/cancelled to the child, SEP-2575 "Request
//	            Cancellation": stdio).
//	GET, DELETE 405 (MCP 2026-07-28, Streamable HTTP, "Earlier Streamable
//	            HTTP Revisions").
//
// One child serves every client. A 2026-07-28 server keeps nothing per
// client between requests (all of it travels in each request's _meta), so a
// child per client would only cost processes; and the notifications it
// sends on listen streams (list changes, resource updates) come from its
// one state, which clients of separate children would never see.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

const (
	version2026 = "2026-07-28"
	// discoverID is the id of the bridge's own server/discover probe.
	discoverID = `"taskgate-stdio-discover"`
	// maxProbeWait bounds the probe: a server of an older version that
	// ignores requests before initialize must not hold the start long.
	maxProbeWait = 5 * time.Second
	// subscriptionIDKey ties a notification to its subscriptions/listen
	// (SEP-2575, "Multiple Concurrent Subscriptions").
	subscriptionIDKey = "io.modelcontextprotocol/subscriptionId"
)

// statelessSide is the Bridge's state with a 2026-07-28 child.
type statelessSide struct {
	b    *Bridge
	sess *session // every call counts against it; never in Bridge.sessions

	mu       sync.Mutex
	proc     *proc                 // the running child; nil while down
	down     error                 // why it is not running
	probes   map[*proc]chan []byte // children being probed → their answer
	listens  map[string]bool       // bridge ids of the listens in flight
	versions []string              // the child's supportedVersions
	tools    toolHeaders           // x-mcp-header annotations of its tools
}

// startStateless probes a first child. It reports true when the child
// speaks 2026-07-28: the bridge is then stateless and that child serves.
// Otherwise the child is stopped, and the bridge goes on with sessions. A
// command that cannot start is an error.
func (b *Bridge) startStateless() (bool, error) {
	st := &statelessSide{b: b, sess: &session{id: "stateless"},
		probes: map[*proc]chan []byte{}, listens: map[string]bool{}}
	b.st = st // dispatchStateless needs it while probing
	p, versions, err := st.spawn()
	if p == nil && err != nil {
		b.st = nil
		return false, err
	}
	if err != nil {
		b.st = nil
		b.log.Info().Str("op", "stdio").Str("probe", err.Error()).
			Msg("the upstream process does not speak 2026-07-28; serving it with sessions")
		return false, nil
	}
	st.proc, st.versions = p, versions
	b.log.Info().Str("op", "stdio").Int("pid", p.cmd.Process.Pid).Strs("versions", versions).
		Msg("upstream process ready: it speaks 2026-07-28, served statelessly")
	b.wg.Add(1)
	go st.supervise(p)
	return true, nil
}

// spawnStateless starts a child and probes it with server/discover. A
// child that started but is not a 2026-07-28 server is stopped (and gone)
// when it returns with the error.
func (st *statelessSide) spawn() (*proc, []string, error) {
	b := st.b
	p, err := startProc(procOptions{argv: b.opts.Command, env: b.opts.Env, dir: b.opts.Dir,
		maxLine: b.opts.MaxMessage, log: b.log, dispatch: st.dispatch, answer: b.answerFile, failCall: b.failCall})
	if err != nil {
		return nil, nil, err
	}
	b.fleet.budget.started(p) // its limits (budget.go)
	b.mu.Lock()
	closed := b.closed
	if !closed {
		b.fleet.procs = append(b.fleet.procs, p)
	}
	b.mu.Unlock()
	if closed {
		p.kill("the gateway shut down")
		<-p.exited
		return p, nil, errors.New("the bridge is closed")
	}
	go func() { <-p.exited; b.forget(p) }()
	versions, err := st.probe(p, min(b.opts.InitTimeout, maxProbeWait))
	if err != nil {
		stopProc(p, "it is not a 2026-07-28 server")
		return p, nil, err
	}
	return p, versions, nil
}

// probe asks child p server/discover at 2026-07-28 (SEP-2575, "Discovery
// for Server Capabilities") and returns its supportedVersions when they
// hold 2026-07-28.
func (st *statelessSide) probe(p *proc, timeout time.Duration) ([]string, error) {
	answer := make(chan []byte, 1)
	st.mu.Lock()
	st.probes[p] = answer
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		delete(st.probes, p)
		st.mu.Unlock()
	}()
	req := mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(discoverID), "method": "server/discover",
		"params": map[string]any{"_meta": bridgeMeta}})
	if err := p.send(req); err != nil {
		return nil, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var msg []byte
	select {
	case msg = <-answer:
	case <-p.exited:
		return nil, fmt.Errorf("server/discover: %w", p.exitErr)
	case <-timer.C:
		return nil, fmt.Errorf("server/discover: no answer within %s", timeout)
	}
	var resp struct {
		Result *struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	switch {
	case json.Unmarshal(msg, &resp) != nil:
		return nil, errors.New("server/discover: a malformed answer")
	case resp.Error != nil:
		return nil, fmt.Errorf("server/discover: %s (%d)", resp.Error.Message, resp.Error.Code)
	case resp.Result == nil || !slices.Contains(resp.Result.SupportedVersions, version2026):
		return nil, errors.New("server/discover: 2026-07-28 is not among its supportedVersions")
	}
	return resp.Result.SupportedVersions, nil
}

// bridgeMeta is the _meta of the bridge's own requests (SEP-2575,
// "Per-Request Metadata"): it declares no client capability.
var bridgeMeta = map[string]any{
	"io.modelcontextprotocol/protocolVersion":    version2026,
	"io.modelcontextprotocol/clientInfo":         map[string]string{"name": "taskgate", "version": "1.0.0"},
	"io.modelcontextprotocol/clientCapabilities": map[string]any{},
}

// superviseStateless keeps the 2026-07-28 child running (keepRunning):
// when it exits, its requests fail (forget) and a new one is started and
// probed after a jittered, capped backoff.
func (st *statelessSide) supervise(p *proc) {
	b := st.b
	b.fleet.keepRunning(p, nil, child{
		start: func() (*proc, error) {
			p, _, err := st.spawn()
			return p, err
		},
		up: func(p *proc, restarted bool) {
			if restarted {
				st.tools.forget()
			}
			st.mu.Lock()
			st.proc, st.down = p, nil
			st.mu.Unlock()
			if restarted {
				b.log.Info().Str("op", "stdio").Int("pid", p.cmd.Process.Pid).Msg("upstream process restarted")
			}
		},
		down: func(err error) {
			st.mu.Lock()
			st.proc, st.down = nil, err
			st.mu.Unlock()
		},
	})
}

// ready is Ready for a stateless bridge.
func (st *statelessSide) ready() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.proc != nil && st.proc.alive() {
		return nil
	}
	if st.down != nil {
		return fmt.Errorf("upstream process down: %v", st.down)
	}
	return errors.New("upstream process down: it is exiting")
}

// child is the running child, or nil and why not.
func (st *statelessSide) child() (*proc, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.proc == nil {
		return nil, st.down
	}
	return st.proc, nil
}

// dispatchStateless routes one message of a 2026-07-28 child.
func (st *statelessSide) dispatch(p *proc, msg []byte) {
	b := st.b
	var env envelope
	if json.Unmarshal(msg, &env) != nil {
		return
	}
	switch {
	case env.Method == "" && string(env.ID) == discoverID:
		st.mu.Lock()
		answer := st.probes[p]
		st.mu.Unlock()
		if answer != nil {
			select {
			case answer <- msg:
			default:
			}
		}
	case env.Method == "" && len(env.ID) > 0:
		b.dispatch(p, msg) // an answer: to its call, under the client's id
	case len(env.ID) > 0:
		// A 2026-07-28 server asks for input inside its results (MRTR);
		// it sends no requests of its own (MCP 2026-07-28, Streamable
		// HTTP, "Receiving Messages").
		if env.Method == "ping" {
			_ = p.send(resultMessage(env.ID, json.RawMessage(`{}`)))
			return
		}
		b.log.Warn().Str("op", "stdio").Str("method", env.Method).Msg("the 2026-07-28 upstream process sent a request; refused")
		_ = p.send(errorMessage(env.ID, mcpwire.CodeMethodNotFound,
			"taskgate serves this process statelessly (2026-07-28): ask for client input with an InputRequiredResult, not a request"))
	case env.Method == "notifications/progress":
		b.calls.Progress(p, msg, env.Params)
	case env.Method == "notifications/cancelled":
		st.serverCancelled(env)
	default:
		st.notify(p, msg, env)
	}
}

// serverCancelled ends the request the child gave up on (a listen it tears
// down, SEP-2575 "Acknowledgment Notification": stdio); its client's
// stream ends with an error.
func (st *statelessSide) serverCancelled(env envelope) {
	b := st.b
	var params struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(env.Params, &params)
	b.mu.Lock()
	if c := b.calls.CallLocked(string(params.RequestID)); c != nil {
		b.calls.FinishLocked(c, reply{msg: errorMessage(c.OrigID, mcpwire.CodeInternalError, "the upstream process ended the request")})
	}
	b.mu.Unlock()
}

// notifyStateless sends a notification of the child to the listen its
// _meta.subscriptionId names, under the client's id (SEP-2575, "Multiple
// Concurrent Subscriptions": on stdio's one channel that key is what ties
// a notification to its stream). Progress names its call by token
// (Bridge.progress); the 2026-07-28 schema defines no other key that ties a
// notification to a request, and the child serves every client at once, so
// an untagged one (a log line, possibly sent after its request was
// answered) could belong to any of them: it is dropped, never guessed.
func (st *statelessSide) notify(p *proc, msg []byte, env envelope) {
	b := st.b
	if env.Method == "notifications/tools/list_changed" {
		st.tools.forget()
	}
	sub, tagged := mcpwire.Meta(env.Params)[subscriptionIDKey]
	var to *call
	if tagged {
		b.mu.Lock()
		if c := b.calls.CallLocked(string(sub)); c != nil && c.Peer == p {
			to = c
		}
		b.mu.Unlock()
	}
	if to == nil {
		b.log.Debug().Str("op", "stdio").Str("method", env.Method).Bool("tagged", tagged).
			Msg("a notification of the upstream process names no request in flight; dropped")
		return
	}
	params := mcpwire.WithMeta(env.Params, subscriptionIDKey, to.OrigID)
	out, err := mcpwire.WithMember(msg, "params", params)
	if err != nil {
		return
	}
	select {
	case to.Out <- out:
	default: // never stall the child's stdout for a slow client
	}
}

// sendStateless sends a client's request to the 2026-07-28 child p (send)
// and returns its call.
func (st *statelessSide) send(p *proc, body []byte, env envelope) (*call, error) {
	b := st.b
	c, err := b.send(st.sess, p, body, env)
	if err != nil && !errors.Is(err, errInvalid) && !p.alive() {
		err = errors.New("the upstream process is not running (it is being restarted)")
	}
	return c, err
}

// ask sends the bridge's own request to child p and returns its result.
func (st *statelessSide) ask(ctx context.Context, p *proc, method string, params map[string]any) (json.RawMessage, error) {
	b := st.b
	params["_meta"] = bridgeMeta
	body := mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": method, "params": params})
	c, err := st.send(p, body, envelope{ID: json.RawMessage("0"), Method: method})
	if err != nil {
		return nil, err
	}
	select {
	case rp := <-c.Final:
		m, err := rp.bytes()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var resp struct {
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(m, &resp) != nil {
			return nil, errors.New(method + ": a malformed answer")
		}
		if resp.Error != nil {
			return nil, errors.New(method + ": " + resp.Error.Message)
		}
		return resp.Result, nil
	case <-ctx.Done():
		b.calls.Cancel(c, "taskgate stopped waiting")
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}
