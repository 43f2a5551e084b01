package main

// The operator's console (package console, docs/console.md): its own
// listener, never the MCP one, so it is not exposed by accident.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/console"
	"github.com/taskgate/taskgate/gateway"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/webhook"
)

func consoleFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "console-listen", Category: catObservability, EnvVars: env("console-listen"),
			Usage: "serve the operator's console (every live task, the tools, the replicas, the failures; cancel) on this `ADDR`; off by default, and only on a loopback address without --console-token"},
		&cli.StringFlag{Name: "console-token", Category: catObservability, EnvVars: env("console-token"),
			Usage: "`TOKEN` the console requires: Authorization: Bearer, or its login form (an HttpOnly, SameSite cookie)"},
		&cli.StringSliceFlag{Name: "console-host", Category: catObservability, EnvVars: env("console-host"),
			Usage: "`NAME[:PORT]` the console is reached by besides localhost, IP addresses and the --console-listen host (a proxy's public name; NAME alone: any port), repeatable or comma-separated; any other Host gets 421 (against DNS rebinding)"},
		&cli.StringFlag{Name: "console-trace-url", Category: catObservability, EnvVars: env("console-trace-url"),
			Usage: "`URL` that links a task's trace id on the console, {trace_id} replaced (e.g. http://jaeger:16686/trace/{trace_id})"},
		&cli.StringFlag{Name: "console-records", Category: catObservability, Value: "auto", EnvVars: env("console-records"),
			Usage: "`MODE` of the operator's index of live tasks and the tasks' timelines, kept by the task store's scripts for the console: auto (while a replica of the fleet serves a console), on or off"},
		&cli.BoolFlag{Name: "trends", Category: catObservability, Value: true, EnvVars: env("trends"),
			Usage: "keep the console's trends (tasks per minute, durations, input waits, reruns per tool) in Redis: each replica adds them up in memory and writes them every few seconds; --trends=false keeps none"},
		&cli.IntFlag{Name: "trends-max-tools", Category: catObservability, Value: gateway.DefaultTrendsMaxTools, EnvVars: env("trends-max-tools"),
			Usage: "`N` tools at most with trends of their own across the fleet; the others are counted together as (other)"},
	}
}

// listenConsole opens the console's listener, or returns nil without
// --console-listen. A non-loopback address needs a token; --console-host
// is checked here, before the gateway starts.
func listenConsole(c *cli.Context) (net.Listener, error) {
	addr := c.String("console-listen")
	if addr == "" {
		return nil, nil
	}
	if err := hostPortError("console-listen", addr); err != nil {
		return nil, err
	}
	if err := console.CheckListen(addr, c.String("console-token")); err != nil {
		return nil, err
	}
	if err := console.CheckHosts(c.StringSlice("console-host")); err != nil {
		return nil, err
	}
	return listen(c, "console-listen")
}

// webhookNames lists the endpoints hooks has now, for the console's
// deliveries page; nil without a dispatcher on this replica: the console
// then offers a retry for every endpoint it finds queues of (another
// replica, or this one after a reload, may deliver them).
func webhookNames(hooks *webhook.Dispatcher) func() []string {
	if hooks == nil {
		return nil
	}
	return func() []string {
		var names []string
		for _, e := range hooks.Endpoints() {
			names = append(names, e.Name)
		}
		return names
	}
}

// serveConsole serves the console on ln until the returned stop. hooks
// is the webhook dispatcher (nil without an endpoint): the deliveries
// page retries the dead letters of the endpoints it has now.
func serveConsole(c *cli.Context, ln net.Listener, store *taskstore.Store, up *upstream.Client, current *policy.Current, hooks *webhook.Dispatcher, log zerolog.Logger) (stop func(), err error) {
	defaultTTL := c.Duration("default-ttl")
	con, err := console.New(console.Config{
		Store:    store,
		Token:    c.String("console-token"),
		Listen:   c.String("console-listen"),
		Hosts:    c.StringSlice("console-host"),
		TraceURL: c.String("console-trace-url"),
		Logger:   log,
		Webhooks: webhookNames(hooks),
		Tools: func(ctx context.Context) ([]console.ToolRow, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			list, err := listTools(ctx, up, nil)
			if err != nil {
				return nil, err
			}
			stats, err := gateway.FleetLatencies(ctx, store, "")
			if err != nil {
				return nil, err
			}
			rows := decideTools(current.Load(), list, stats, defaultTTL)
			out := make([]console.ToolRow, len(rows))
			for i, r := range rows {
				out[i] = console.ToolRow{Tool: r.Tool, Legacy: r.Legacy, Modern: r.Modern, Tasks: r.Tasks, Reason: r.Reason,
					Samples: r.Samples, P50Ms: r.P50Ms, P95Ms: r.P95Ms}
			}
			return out, nil
		},
	})
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: con, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	log.Info().Str("console_listen", ln.Addr().String()).Bool("token", c.String("console-token") != "").Msg("console served")
	return func() { _ = srv.Close(); <-done }, nil
}

// recordsMode is --console-records: auto follows the fleet's consoles
// (the heartbeat, heartbeat.go); on is whether the records start on.
type recordsMode struct{ auto, on bool }

// consoleRecords reads --console-records. Commands without the flag keep
// the records (the store's default).
func consoleRecords(c *cli.Context) (recordsMode, error) {
	v, defined := c.Value("console-records").(string)
	if !defined {
		return recordsMode{on: true}, nil
	}
	switch v {
	case "auto":
		return recordsMode{auto: true, on: c.String("console-listen") != ""}, nil
	case "on":
		return recordsMode{on: true}, nil
	case "off":
		return recordsMode{}, nil
	}
	return recordsMode{}, fmt.Errorf("invalid --console-records %q: want auto, on or off", v)
}
