package stdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"
)

// Options configure a Bridge.
type Options struct {
	// Command is the child's argv (SplitCommand); Command[0] is looked up
	// in PATH.
	Command []string
	// Env adds KEY=VALUE entries to the gateway's environment for the child.
	Env []string
	// Dir is the child's working directory; empty: the gateway's.
	Dir string
	// MaxMessage bounds a line the child writes, and a message sent to
	// it. A longer answer fails only the request it answers. Zero means
	// DefaultMaxMessage.
	MaxMessage int
	// Shared serves every client session with one child, initialized by
	// the bridge, instead of a child per session.
	Shared bool
	// PerPrincipal serves all the sessions of one principal
	// (upstream.Principal on the initialize's context) with one child,
	// started for its first session (principal.go), instead of a child
	// per session; a session without a principal gets a child of its
	// own. The bridge is then a session server whatever versions the
	// command speaks: it never serves a child statelessly (a 2026-07-28
	// request of no session is refused as a session server refuses it),
	// since that one child would serve every principal. Ignored when
	// Shared.
	PerPrincipal bool
	// MaxSessions bounds the sessions (each a child of its own unless
	// Shared; with PerPrincipal, it bounds the children, and
	// MaxSessionsPerPrincipal the sessions on each); an initialize beyond
	// it is refused. Zero means
	// DefaultMaxSessions (DefaultSharedMaxSessions when Shared).
	MaxSessions int
	// MaxSessionsPerPrincipal bounds the sessions of one principal
	// (upstream.Principal on the initialize's context; a request without
	// one counts for nobody), so that one client cannot take them all.
	// Zero means half of MaxSessions (at least 1); negative: no cap.
	MaxSessionsPerPrincipal int
	// SessionIdle ends a session with no call in flight and no request for
	// this long (its child stopped, unless Shared). Zero means
	// DefaultSessionIdle.
	SessionIdle time.Duration
	// InitTimeout bounds the child's answer to initialize. Zero: 30 s.
	InitTimeout time.Duration
	// HoldAsk bounds how long a request of the child waits for its
	// session's client to open a GET stream. Zero: DefaultHoldAsk.
	HoldAsk time.Duration
	// Warm keeps this many children started ahead, waiting for a
	// session's initialize (warm.go); they count against MaxSessions.
	// Zero: none. Ignored when Shared.
	Warm int
	// MemoryLimit stops a child whose process group's resident memory
	// goes over it, in bytes; MemoryTotal stops one child while all of
	// them together are over it; CPULimit stops a child whose group used
	// more cores than it, averaged over 10 s; OpenFiles is each child's
	// RLIMIT_NOFILE. Zero: none. Linux only (budget.go).
	MemoryLimit, MemoryTotal int64
	CPULimit                 float64
	OpenFiles                int
	// BudgetEvery is how often the children's usage is read. Zero:
	// DefaultBudgetEvery.
	BudgetEvery time.Duration
	// Logger gets the child's stderr and the bridge's events.
	Logger zerolog.Logger
}

// Defaults of Options.
const (
	// DefaultMaxSessions: a node MCP server's child takes about 68 MiB
	// of RSS once initialized (docs/stdio.md), so 20 of them leave a 2 GiB
	// container room for taskgate and its in-flight answers.
	DefaultMaxSessions = 20
	// DefaultSharedMaxSessions: sessions of a shared child cost no process.
	DefaultSharedMaxSessions = 1000
	DefaultSessionIdle       = 30 * time.Minute
	DefaultMaxMessage        = 64 << 20
	DefaultHoldAsk           = 30 * time.Second
)

// initParams is the shared child's initialize: every kind of request it
// may send is declared, since some client may answer it.
var initParams = json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}},"sampling":{},"roots":{"listChanged":true}},"clientInfo":{"name":"taskgate","version":"1.0.0"}}`)

// frontable are the versions a client may negotiate with the bridge.
var frontable = map[string]bool{"2025-11-25": true, "2025-06-18": true, "2025-03-26": true}

// Bridge serves Streamable HTTP on top of the child(ren).
type Bridge struct {
	opts Options
	log  zerolog.Logger

	mu       sync.Mutex
	shared   *proc // the running shared child; nil while down or unless Shared
	down     error // why the shared child is not running
	sessions map[string]*session
	fleet    fleet                // the children: started, warm, principals', respawned, watched (fleet.go)
	calls    *callTable           // calls in flight, the children's requests sent to clients, progress tokens
	owned    int                  // sessions opened here (initialize), and those being opened
	shares   bridgesession.Shares // the owned sessions per principal (--max-sessions-per-principal)
	adopted  int                  // sessions adopted from other replicas
	closed   bool
	st       *statelessSide // set when the child speaks 2026-07-28 (stateless.go)

	rep atomic.Pointer[replicas] // set by JoinReplicas (replicas.go)

	metrics *Metrics

	stop chan struct{}
	wg   sync.WaitGroup
}

type session struct {
	bridgesession.Core[*ask] // its GET streams, calls in flight, what its client declared (nil Caps when Shared)
	keepAlive                // its initialize, to outlive its child (respawn.go)

	id      string
	proc    *proc // its own child, or its principal's (pc); nil when Shared
	pc      *principalChild
	adopted bool // opened by another replica's bridge (session)
	// principal is whose share the session counts in (owned sessions;
	// "" for none).
	principal string
}

// call is a client request in flight on a child (bridgesession.Table).
type call = bridgesession.Call[*session, *proc, reply]

// ask is a request of a child sent to a client, awaiting its answer.
type ask = bridgesession.Ask[*session, *proc, reply]

// callTable is the bridge's calls, asks and progress tokens.
type callTable = bridgesession.Table[*session, *proc, reply]

// reply is a call's response: a message, or one too large to hold
// (large.go), streamed from a file. Whoever takes the call out of the
// call table sends it, under Bridge.mu (FinishLocked).
type reply struct {
	msg []byte
	big *bigAnswer
}

// newCallTable is the bridge's call table: ids "taskgate-stdio-N", sent
// to the children's pipes.
func (b *Bridge) newCallTable() *callTable {
	return bridgesession.NewTable[*session](bridgesession.Config[*proc, reply]{
		Prefix: "taskgate-stdio", Mu: &b.mu, Log: b.log, Op: "stdio",
		Reply:      func(msg []byte) reply { return reply{msg: msg} },
		SendLocked: func(p *proc, msg []byte) { _ = p.send(msg) },
		Release:    func(r reply) { r.big.release() },
		WriteReply: func(w http.ResponseWriter, sse *mcpwire.Writer, origID json.RawMessage, r reply) {
			if r.big == nil {
				_ = sse.SendRaw(r.msg)
				return
			}
			if err := r.big.writeTo(w, sse.Started(), origID); err != nil {
				b.log.Debug().Str("op", "stdio").Err(err).Msg("a large answer did not reach its client")
			}
		},
	})
}

// Start checks that the command can run, probes whether it speaks
// 2026-07-28 (stateless.go; not with PerPrincipal), starts the shared
// child (when Shared) and its supervisor, and returns the Bridge. A
// command that is not found or not executable is an error; a child that
// starts but fails its handshake is restarted like one that exited.
func Start(opts Options) (*Bridge, error) {
	if len(opts.Command) == 0 {
		return nil, errors.New("stdio: no command")
	}
	name := opts.Command[0]
	if opts.Dir != "" && strings.ContainsRune(name, '/') && !filepath.IsAbs(name) {
		name = filepath.Join(opts.Dir, name) // exec resolves it in Dir too
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("cannot run %q: %v", opts.Command[0], unwrapExec(errors.Unwrap(err)))
	}
	opts.Command = append([]string{path}, opts.Command[1:]...)
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = DefaultMaxMessage
	}
	if opts.HoldAsk <= 0 {
		opts.HoldAsk = DefaultHoldAsk
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
		if opts.Shared {
			opts.MaxSessions = DefaultSharedMaxSessions
		}
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = DefaultSessionIdle
	}
	if opts.MaxSessionsPerPrincipal == 0 {
		opts.MaxSessionsPerPrincipal = bridgesession.DefaultShare(opts.MaxSessions)
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = 30 * time.Second
	}
	if err := checkBudget(&opts); err != nil {
		return nil, err
	}
	b := &Bridge{opts: opts, log: opts.Logger.With().Str("upstream_command", opts.Command[0]).Logger(),
		sessions: map[string]*session{}, stop: make(chan struct{}), down: errors.New("the upstream process is starting")}
	b.fleet = fleet{b: b, principals: map[string]*principalChild{}}
	b.calls = b.newCallTable()
	b.metrics = NewMetrics()
	b.metrics.children.b = b
	// A working directory the children can't start in is named as such
	// (exec would blame the program), whatever the scope.
	if err := checkDir(opts.Command[0], opts.Dir); err != nil {
		return nil, err
	}
	b.fleet.startBudget() // before the first child: its limits apply to every one
	if b.fleet.principalsOnly() {
		// The stateless child would serve every principal's 2026-07-28
		// clients in one process. No probe: the bridge is a session
		// server, and the gateway holds a session per owner for its
		// 2026-07-28 clients, which joins the principal's child.
		b.log.Info().Str("op", "stdio").
			Msg("principal scope: the upstream process is served with sessions, a child per principal, whatever versions it speaks")
	} else if stateless, err := b.startStateless(); err != nil {
		return nil, err
	} else if stateless {
		if !opts.Shared { // sessions of 2025-11-25 clients, a child each
			b.wg.Add(1)
			go b.reap()
		}
		b.fleet.startWarm()
		return b, nil
	}
	if opts.Shared {
		p, err := b.fleet.spawn(initParams, nil)
		if err != nil && p == nil {
			return nil, err
		}
		if err == nil {
			b.shared, b.down = p, nil // ready when Start returns
		}
		b.wg.Add(1)
		go b.fleet.supervise(p, err)
	}
	b.wg.Add(1)
	go b.reap()
	b.fleet.startWarm()
	return b, nil
}

// Ready reports whether a request can be served now: the bridge is open
// (and, when Shared, the shared child is running).
func (b *Bridge) Ready(context.Context) error {
	if b.st != nil {
		return b.st.ready()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return errors.New("the upstream process is stopped")
	case !b.opts.Shared, b.shared != nil && b.shared.alive():
		return nil
	case b.shared != nil:
		return errors.New("upstream process down: it is exiting")
	}
	return fmt.Errorf("upstream process down: %v", b.down)
}

// Close stops every child: stdin closed and SIGTERM at once, SIGKILL once
// ctx ends. Call it after the gateway drained its held calls.
func (b *Bridge) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	procs := append([]*proc(nil), b.fleet.procs...)
	for _, s := range b.sessions {
		b.endSessionLocked(s) // their held requests' timers stop
	}
	b.mu.Unlock()
	close(b.stop)
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(ctx, "the gateway shut down") }()
	}
	wg.Wait()
	b.wg.Wait()
	return nil
}
