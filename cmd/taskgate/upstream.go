package main

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/upstream/stdio"
)

// stdioFlags start the upstream as a child process (serve and tools).
func stdioFlags(serve bool) []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "upstream-command", Category: catUpstream, EnvVars: env("upstream-command"),
			Usage: "`'CMD ARG...'` of an MCP server that speaks stdio, run as a child instead of --upstream; split as a shell would, but no shell runs"},
		&cli.StringSliceFlag{Name: "upstream-env", Category: catUpstream, EnvVars: env("upstream-env"),
			Usage: "`KEY=VALUE` added to the environment of --upstream-command (repeatable)"},
		&cli.StringFlag{Name: "upstream-dir", Category: catUpstream, EnvVars: env("upstream-dir"), TakesFile: true,
			Usage: "working `DIR` of --upstream-command (default: taskgate's)"},
	}
	if serve {
		flags = append(flags,
			&cli.BoolFlag{Name: "upstream-per-session", Category: catUpstream, EnvVars: env("upstream-per-session"),
				Usage: "give each client session its own --upstream-command process, for servers that keep per-client state"},
			&cli.IntFlag{Name: "max-sessions", Category: catUpstream, Value: stdio.DefaultMaxSessions, EnvVars: env("max-sessions"),
				Usage: "most client sessions of --upstream-command on this replica (each a process with --upstream-per-session)"},
			&cli.DurationFlag{Name: "session-idle", Category: catUpstream, Value: stdio.DefaultSessionIdle, EnvVars: env("session-idle"),
				Usage: "end an --upstream-command session (and its process, with --upstream-per-session) after this long without a request or a call in flight"},
		)
	}
	return flags
}

// openedUpstream is the upstream client, and the child process behind it
// for --upstream-command.
type openedUpstream struct {
	*upstream.Client
	bridge *stdio.Bridge // nil for --upstream
	name   string        // what the startup line names
}

// close stops the child (SIGTERM, then SIGKILL once ctx ends).
func (o *openedUpstream) close(ctx context.Context) {
	if o.bridge != nil {
		_ = o.bridge.Close(ctx)
	}
}

// openUpstream reads --upstream or --upstream-command (exactly one) and
// the flags that go with them. maxLine bounds a stdio message (--max-body).
func openUpstream(c *cli.Context, log zerolog.Logger, maxLine int64, tp trace.TracerProvider) (*openedUpstream, error) {
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
		for _, name := range []string{"upstream-env", "upstream-dir", "upstream-per-session"} {
			if c.IsSet(name) {
				return nil, fmt.Errorf("--%s goes with --upstream-command, not --upstream", name)
			}
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
	sopts := stdio.Options{Command: argv, Env: env, Dir: c.String("upstream-dir"), MaxLine: int(maxLine), Logger: log}
	if c.Command.Name == "serve" {
		sopts.PerSession = c.Bool("upstream-per-session")
		sopts.MaxSessions = c.Int("max-sessions")
		sopts.SessionIdle = c.Duration("session-idle")
		if sopts.MaxSessions <= 0 {
			return nil, fmt.Errorf("invalid --max-sessions %d: it must be positive", sopts.MaxSessions)
		}
		if sopts.SessionIdle <= 0 {
			return nil, fmt.Errorf("invalid --session-idle %s: it must be positive", sopts.SessionIdle)
		}
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
