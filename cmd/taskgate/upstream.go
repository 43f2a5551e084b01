package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/upstream/sse"
	"github.com/taskgate/taskgate/upstream/stdio"
)

// stdioFlags start the upstream as a child process (serve and tools).
func stdioFlags(serve bool) []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "upstream-command", EnvVars: env("upstream-command"), Category: catUpstream,
			Usage: "`'CMD ARG...'` of an MCP server that speaks stdio, run as a child instead of --upstream (one per client session); split as a shell would, but no shell runs"},
		&cli.StringSliceFlag{Name: "upstream-env", EnvVars: env("upstream-env"), Category: catUpstream,
			Usage: "`KEY=VALUE` added to the environment of --upstream-command (repeatable)"},
		&cli.StringFlag{Name: "upstream-dir", EnvVars: env("upstream-dir"), TakesFile: true, Category: catUpstream,
			Usage: "working `DIR` of --upstream-command (default: taskgate's)"},
		&cli.StringFlag{Name: "upstream-max-message", Value: "64MiB", EnvVars: env("upstream-max-message"), Category: catUpstream,
			Usage: "largest `SIZE` of a message to or from --upstream-command (a larger answer fails only its request), or of an HTTP+SSE --upstream's event (a larger one ends its session)"},
	}
	if serve {
		flags = append(flags,
			&cli.StringFlag{Name: "upstream-scope", Value: scopeSession, EnvVars: env("upstream-scope"), Category: catUpstream,
				Usage: "whom one --upstream-command process serves: `SCOPE` session (each client session a process of its own), principal (all the sessions of one signed-in principal, across its clients and replicas; needs --auth-issuer or --auth-introspection-url) or shared (every session of the replica, as --upstream-shared); see docs/stdio.md"},
			&cli.BoolFlag{Name: "upstream-shared", EnvVars: env("upstream-shared"), Category: catUpstream,
				Usage: "one --upstream-command process for every client session of a replica, for servers that keep nothing per client (roots, state, log level and subscriptions are then shared; see docs/stdio.md); the same as --upstream-scope shared"},
			&cli.BoolFlag{Name: "upstream-per-session", EnvVars: env("upstream-per-session"), Category: catUpstream, Hidden: true,
				Usage: "deprecated: a process per client session is the default"},
		)
		flags = append(flags, budgetFlags()...) // children.go
		flags = append(flags,
			&cli.IntFlag{Name: "max-sessions", Value: stdio.DefaultMaxSessions, EnvVars: env("max-sessions"), Category: catUpstream,
				Usage: "most client sessions of --upstream-command on this replica, each a process of its own (about 70 MiB for a node server); 1000 by default with --upstream-shared, and for an HTTP+SSE --upstream (each an SSE stream)"},
			&cli.IntFlag{Name: "max-sessions-per-principal", EnvVars: env("max-sessions-per-principal"), Category: catUpstream, DefaultText: "half of --max-sessions",
				Usage: "most of those sessions one principal (its validated identity or Authorization, else its client address) holds on this replica, so no one locks the others out; past it its initialize is refused with a retry hint (0: no cap)"},
			&cli.IntFlag{Name: "upstream-warm", Value: defaultWarm, EnvVars: env("upstream-warm"), Category: catUpstream,
				Usage: "`N` processes of --upstream-command kept started ahead, each waiting for a new client session's initialize, so that it does not wait for the process to load; replaced in the background as sessions take them, and counted against --max-sessions (0: none; not with --upstream-shared)"},
			&cli.DurationFlag{Name: "session-idle", Value: stdio.DefaultSessionIdle, EnvVars: env("session-idle"), Category: catUpstream,
				Usage: "end an --upstream-command session, and stop its process (for an HTTP+SSE --upstream: close its SSE stream), after this long without a request or a call in flight"},
		)
	}
	return flags
}

// openedUpstream is the upstream client, and the child process behind it
// for --upstream-command.
type openedUpstream struct {
	*upstream.Client
	bridge *stdio.Bridge // nil for --upstream
	sse    *sse.Bridge   // set for an HTTP+SSE --upstream
	name   string        // what the startup line names
}

// collectors are the stdio bridge's metrics; none for --upstream.
func (o *openedUpstream) collectors() []prometheus.Collector {
	if o.bridge == nil {
		return nil
	}
	return o.bridge.Metrics().Collectors()
}

// close stops the child (SIGTERM, then SIGKILL once ctx ends).
func (o *openedUpstream) close(ctx context.Context) {
	if o.bridge != nil {
		_ = o.bridge.Close(ctx)
	}
	if o.sse != nil {
		_ = o.sse.Close(ctx)
	}
}

// openUpstream reads --upstream or --upstream-command (exactly one) and
// the flags that go with them.
func openUpstream(c *cli.Context, log zerolog.Logger, tp trace.TracerProvider) (*openedUpstream, error) {
	url, command := c.String("upstream"), c.String("upstream-command")
	switch {
	case url == "" && command == "":
		return nil, errors.New("missing --upstream: give the URL of the MCP server to front, e.g. --upstream http://127.0.0.1:3000/mcp, or --upstream-command 'CMD ARG...' for a stdio server (or set TASKGATE_UPSTREAM)")
	case url != "" && command != "":
		return nil, errors.New("give --upstream or --upstream-command, not both")
	}
	opts, err := upstreamOptions(c)
	if err != nil {
		return nil, err
	}
	opts.Tracer = tp
	if url != "" {
		for _, name := range []string{"upstream-env", "upstream-dir", "upstream-per-session", "upstream-shared", "upstream-scope", "upstream-warm", "upstream-memory-limit", "upstream-memory-total", "upstream-cpu-limit", "upstream-open-files"} {
			if c.IsSet(name) {
				return nil, fmt.Errorf("--%s goes with --upstream-command, not --upstream", name)
			}
		}
		transport, err := upstreamTransport(c, url, opts, log)
		if err != nil {
			return nil, err
		}
		if transport == sse.SSE {
			return openSSE(c, url, opts, log)
		}
		if c.IsSet("upstream-max-message") {
			return nil, errors.New("--upstream-max-message goes with --upstream-command or an HTTP+SSE --upstream, not a Streamable HTTP one")
		}
		up, err := upstream.New(url, opts)
		if err != nil {
			return nil, fmt.Errorf("invalid --upstream: %v", err)
		}
		return &openedUpstream{Client: up, name: up.URL()}, nil
	}
	if opts.TLSConfig != nil {
		return nil, errors.New("--upstream-ca and --upstream-client-cert are for an https --upstream, not --upstream-command")
	}
	argv, err := stdio.SplitCommand(command)
	if err != nil {
		return nil, fmt.Errorf("invalid --upstream-command: %v", err)
	}
	env := c.StringSlice("upstream-env")
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("invalid --upstream-env %q: want KEY=VALUE", kv)
		}
	}
	lim, err := readBridgeLimits(c)
	if err != nil {
		return nil, err
	}
	sopts := stdio.Options{Command: argv, Env: env, Dir: c.String("upstream-dir"), MaxMessage: lim.maxMessage, Logger: log,
		MaxSessions: lim.maxSessions, SessionIdle: lim.sessionIdle, MaxSessionsPerPrincipal: lim.perPrincipal} // MaxSessions 0: the bridge's default for the mode
	if c.Command.Name == "serve" {
		scope, err := scopeFlag(c)
		if err != nil {
			return nil, err
		}
		sopts.Shared, sopts.PerPrincipal = scope == scopeShared, scope == scopePrincipal
		if c.Bool("upstream-per-session") {
			if sopts.Shared {
				return nil, errors.New("give --upstream-shared or --upstream-per-session, not both (--upstream-per-session is deprecated: a process per client session is the default)")
			}
			log.Warn().Msg("--upstream-per-session is deprecated and does nothing: each client session gets its own --upstream-command process by default (--upstream-shared shares one)")
		}
	}
	if sopts.Warm, err = warmFlag(c, sopts); err != nil {
		return nil, err
	}
	if err := readBudget(c, &sopts); err != nil {
		return nil, err
	}
	br, err := stdio.Start(sopts)
	if err != nil {
		return nil, fmt.Errorf("invalid --upstream-command: %v", err)
	}
	opts.Transport, opts.Ready, opts.Name = br.Transport(), br.Ready, "stdio: "+argv[0]
	up, err := upstream.New(stdio.URL, opts)
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = br.Close(ctx)
		return nil, err
	}
	return &openedUpstream{Client: up, bridge: br, name: up.URL()}, nil
}

// bridgeLimits are the flags both local bridges (a stdio server's, an
// HTTP+SSE server's) are bounded by.
type bridgeLimits struct {
	maxMessage   int           // --upstream-max-message
	maxSessions  int           // --max-sessions; 0: not set, the bridge's default
	sessionIdle  time.Duration // --session-idle; 0: not serve, the bridge's default
	perPrincipal int           // --max-sessions-per-principal; 0: the bridge's default, negative: none
}

// readBridgeLimits reads and checks them. Sessions are bounded only where
// they are served (the serve command): the tools command makes one.
func readBridgeLimits(c *cli.Context) (bridgeLimits, error) {
	var lim bridgeLimits
	maxMessage, err := sizeFlag(c, "upstream-max-message")
	if err != nil {
		return lim, err
	}
	if maxMessage > 1<<31-1 {
		return lim, fmt.Errorf("invalid --upstream-max-message %q: at most 2GiB", c.String("upstream-max-message"))
	}
	lim.maxMessage = int(maxMessage)
	if c.Command.Name != "serve" {
		return lim, nil
	}
	if c.IsSet("max-sessions") {
		lim.maxSessions = c.Int("max-sessions")
		if lim.maxSessions <= 0 {
			return lim, fmt.Errorf("invalid --max-sessions %d: it must be positive", lim.maxSessions)
		}
	}
	if v := c.Int("max-sessions-per-principal"); v < 0 {
		return lim, fmt.Errorf("invalid --max-sessions-per-principal %d: it must be a number of sessions, or 0 for no cap", v)
	}
	lim.perPrincipal = perPrincipal(c, "max-sessions-per-principal")
	lim.sessionIdle = c.Duration("session-idle")
	if lim.sessionIdle <= 0 {
		return lim, fmt.Errorf("invalid --session-idle %s: it must be positive", lim.sessionIdle)
	}
	return lim, nil
}

// defaultWarm: one process started ahead gives the next session a warm
// start and costs one idle child (about 70 MiB for a node server); a burst
// of sessions takes it and the rest start cold while it is replaced.
const defaultWarm = 1

// warmFlag reads --upstream-warm (serve only): 0 up to --max-sessions.
func warmFlag(c *cli.Context, o stdio.Options) (int, error) {
	if c.Command.Name != "serve" {
		return 0, nil
	}
	n := c.Int("upstream-warm")
	if o.Shared {
		if c.IsSet("upstream-warm") && n != 0 {
			return 0, errors.New("--upstream-warm goes with a process per client session, not --upstream-shared (its one process is started at once)")
		}
		return 0, nil
	}
	limit := o.MaxSessions
	if limit == 0 {
		limit = stdio.DefaultMaxSessions
	}
	switch {
	case n < 0:
		return 0, fmt.Errorf("invalid --upstream-warm %d: it must be a number of processes, or 0 for none", n)
	case n > limit:
		return 0, fmt.Errorf("invalid --upstream-warm %d: at most --max-sessions (%d), which counts the warm processes too", n, limit)
	}
	return n, nil
}

// The values of --upstream-scope.
const (
	scopeSession   = "session"
	scopePrincipal = "principal"
	scopeShared    = "shared"
)

// scopeFlag reads --upstream-scope and its alias --upstream-shared (serve
// only). A principal scope needs sign-in: without it a principal is a
// client address or a token's digest, which would let clients behind one
// address, or one token's holders, into each other's process.
func scopeFlag(c *cli.Context) (string, error) {
	scope := c.String("upstream-scope")
	switch scope {
	case scopeSession, scopePrincipal, scopeShared:
	default:
		return "", fmt.Errorf("invalid --upstream-scope %q: want session, principal or shared", scope)
	}
	if c.IsSet("upstream-shared") {
		shared := c.Bool("upstream-shared")
		if c.IsSet("upstream-scope") && shared != (scope == scopeShared) {
			return "", fmt.Errorf("--upstream-shared=%t and --upstream-scope %s disagree: give --upstream-scope alone (--upstream-shared is --upstream-scope shared)", shared, scope)
		}
		if shared {
			scope = scopeShared
		}
	}
	if scope == scopePrincipal && c.String("auth-issuer") == "" && c.String("auth-introspection-url") == "" {
		return "", errors.New("--upstream-scope principal needs sign-in (--auth-issuer or --auth-introspection-url): without it a principal is a client address or a token's digest, not a user")
	}
	return scope, nil
}
