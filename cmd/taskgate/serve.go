package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/gateway"
	"github.com/taskgate/taskgate/policy"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve MCP at --listen in front of the --upstream MCP server",
		UsageText: "taskgate serve (--upstream URL | --upstream-command 'CMD ARG...') [flags]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Category: catListen, Value: "127.0.0.1:8080", EnvVars: env("listen"),
				Usage: "`ADDR` to serve on (host:port)"},
			&cli.StringFlag{Name: "upstream", Category: catUpstream, EnvVars: env("upstream"),
				Usage: "`URL` of the MCP server to front, e.g. http://127.0.0.1:3000/mcp (this or --upstream-command is required)"},
			&cli.StringFlag{Name: "path", Category: catListen, Value: gateway.DefaultPath, EnvVars: env("path"),
				Usage: "HTTP `PATH` of the MCP endpoint"},
			&cli.StringFlag{Name: "max-body", Category: catListen, Value: "4MiB", EnvVars: env("max-body"),
				Usage: "largest POST body accepted (`SIZE`: 4194304, 512KiB, 4MiB); larger ones get HTTP 413"},
			&cli.DurationFlag{Name: "shutdown-timeout", Category: catListen, Value: 10 * time.Second, EnvVars: env("shutdown-timeout"),
				Usage: "after draining (--drain-timeout), how long open requests may run before they are cut"},
			&cli.BoolFlag{Name: "access-log", Category: catObservability, EnvVars: env("access-log"),
				Usage: "log one line per HTTP request when it ends: method, status, bytes, duration, remote address"},
			&cli.StringFlag{Name: "replica-id", Category: catStore, EnvVars: env("replica-id"), DefaultText: "the hostname",
				Usage: "`ID` of this replica in leases, failed-task messages and every log line; unique per replica sharing a store (two processes on one host need their own)"},
			&cli.DurationFlag{Name: "drain-timeout", Category: catListen, Value: 30 * time.Second, EnvVars: env("drain-timeout"),
				Usage: "after SIGTERM, how long held upstream calls may finish before their tasks are failed"},
			&cli.Float64Flag{Name: "poll-limit", Category: catTasks, Value: gateway.DefaultPollLimit, EnvVars: env("poll-limit"),
				Usage: "most tasks/get (and tasks/list) per second one client may send for one task on this replica, bursts of twice that; faster polls get HTTP 429 with Retry-After (0: no limit)"},
			&cli.StringFlag{Name: "metrics-listen", Category: catObservability, EnvVars: env("metrics-listen"),
				Usage: "serve the Prometheus metrics on this `ADDR` instead of at /metrics on --listen"},
			&cli.IntFlag{Name: "max-inflight", Category: catTasks, Value: 1000, EnvVars: env("max-inflight"),
				Usage: "most upstream calls held at once for tasks on this replica; past it new tasks are refused (0: no limit)"},
			&cli.IntFlag{Name: "max-inflight-per-principal", Category: catTasks, EnvVars: env("max-inflight-per-principal"), DefaultText: "half of --max-inflight",
				Usage: "most upstream calls one principal (its validated identity or Authorization, else its client address) holds at once on this replica, so no one takes the whole of --max-inflight; past it its calls are refused with a retry hint (0: no cap)"},
			&cli.Float64Flag{Name: "max-task-rate", Category: catTasks, Value: gateway.DefaultMaxTaskRate, EnvVars: env("max-task-rate"),
				Usage: "most tasks one principal may create a minute on this replica, a minute's worth at once; past it task creations are refused with the wait until the next (0: no limit)"},
			&cli.DurationFlag{Name: "lease", Category: catTasks, Value: gateway.DefaultLease, EnvVars: env("lease"),
				Usage: "how long a worker's claim on its task lasts unrenewed; when a replica dies, another fails its tasks this long (plus a 2s grace) after its last renewal"},
			&cli.DurationFlag{Name: "lease-renew", Category: catTasks, Value: gateway.DefaultLeaseRenew, EnvVars: env("lease-renew"),
				Usage: "how often a worker renews its lease, and how often each replica sweeps for expired ones; shorter than --lease"},
			&cli.DurationFlag{Name: "mrtr-hold", Category: catTasks, EnvVars: env("mrtr-hold"), DefaultText: "8 x the call's hybrid wait",
				Usage: "how long an input_required round a 2026-07-28 client got before its task began (a session upstream asked for input within the hybrid wait) waits for the client's retry; then the held upstream call is cancelled"},
			&cli.StringFlag{Name: "log-format", Category: catObservability, Value: "json", EnvVars: env("log-format"),
				Usage: "json or console"},
			&cli.StringFlag{Name: "log-level", Category: catObservability, Value: "info", EnvVars: env("log-level"),
				Usage: "debug, info, warn or error"},
			&cli.DurationFlag{Name: "upstream-restart-grace", Category: catUpstream, Value: gateway.DefaultUpstreamRestartGrace, EnvVars: env("upstream-restart-grace"),
				Usage: "how long a call held through the upstream's own task keeps asking for its result while the upstream is unreachable, so a rolling restart of the upstream fails no task"},
			&cli.BoolFlag{Name: "ready-requires-upstream", Category: catObservability, EnvVars: env("ready-requires-upstream"),
				Usage: "make /readyz answer 503 while the upstream is unreachable or not an MCP endpoint; by default /readyz is 200 whenever the task store answers, so clients can still read their tasks, and the upstream's state is in its body and in taskgate_upstream_up"},
		}, slices.Concat(storeFlags(), ruleFlags(), policyFlags(true), []cli.Flag{latencySyncFlag()},
			frontDoorFlags(), identityFlags(), authFlags(), upstreamFlags(), stdioFlags(true), []cli.Flag{advertiseFlag()}, fallbackFlags(),
			consoleFlags(), rerunFlags(), webhookFlags())...),
		Action: serve,
	}
}

func serve(c *cli.Context) error {
	if c.Args().Len() > 0 {
		// urfave/cli stops reading flags at the first argument: say so,
		// rather than miss the flags after it.
		return fmt.Errorf("unexpected argument %q: serve takes only flags, and flags after an argument are not read", c.Args().First())
	}
	if c.Duration("mrtr-hold") < 0 {
		return fmt.Errorf("invalid --mrtr-hold %s: it must not be negative", c.Duration("mrtr-hold"))
	}
	base, err := newLogger(c.String("log-format"), c.String("log-level"), c.App.ErrWriter)
	if err != nil {
		return err
	}
	replica, err := replicaID(c.String("replica-id"))
	if err != nil {
		return err
	}
	// The gateway adds the replica to its own lines (Config.ReplicaID);
	// serve's lines get it here.
	log := base.With().Str("replica", replica).Logger()
	maxBody, err := sizeFlag(c, "max-body")
	if err != nil {
		return err
	}
	door, err := frontDoor(c, log)
	if err != nil {
		return err
	}
	path := c.String("path")
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("invalid --path %q: it must start with /", path)
	}
	rules, err := taskRules(c)
	if err != nil {
		return err
	}
	if err := checkRerunFlags(c); err != nil {
		return err
	}
	pol, err := newPolicySource(c, rules)
	if err != nil {
		return err
	}
	policyFile, err := pol.read()
	if err != nil {
		return err
	}
	policyCfg, err := pol.build(policyFile)
	if err != nil {
		return err
	}
	hooks, err := newWebhookSource(c)
	if err != nil {
		return err
	}
	hooksFile, err := hooks.read()
	if err != nil {
		return err
	}
	if _, err := hooks.build(hooksFile); err != nil {
		return err
	}
	if c.Duration("latency-sync") <= 0 {
		return fmt.Errorf("invalid --latency-sync %s: it must be positive", c.Duration("latency-sync"))
	}
	if c.Duration("drain-timeout") < 0 {
		return fmt.Errorf("invalid --drain-timeout %s: it must not be negative", c.Duration("drain-timeout"))
	}
	if c.Duration("upstream-restart-grace") <= 0 {
		return fmt.Errorf("invalid --upstream-restart-grace %s: want a positive duration, e.g. 60s", c.Duration("upstream-restart-grace"))
	}
	if v := c.Float64("poll-limit"); v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("invalid --poll-limit %v: it must be a number of polls per second, or 0 for no limit", v)
	}
	if v := c.Int("max-inflight-per-principal"); v < 0 {
		return fmt.Errorf("invalid --max-inflight-per-principal %d: it must be a number of calls, or 0 for no cap", v)
	}
	if v := c.Float64("max-task-rate"); v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("invalid --max-task-rate %v: it must be a number of tasks a minute, or 0 for no limit", v)
	}
	if c.Duration("lease") <= 0 {
		return fmt.Errorf("invalid --lease %s: it must be positive", c.Duration("lease"))
	}
	if r := c.Duration("lease-renew"); r <= 0 || r >= c.Duration("lease") {
		return fmt.Errorf("invalid --lease-renew %s: it must be positive and shorter than --lease %s", r, c.Duration("lease"))
	}
	publicURL, proxies, err := publicIdentity(c)
	if err != nil {
		return err
	}
	authn, err := authenticator(c, publicURL, door.scheme(), c.String("listen"), path, log)
	if err != nil {
		return err
	}
	// Then listen, before anything starts: a busy port is reported at
	// once, not after a stdio child started or Redis was dialled.
	ln, err := listen(c, "listen")
	if err != nil {
		return err
	}
	defer ln.Close() // Serve closes it too; this is for the errors before
	var mln net.Listener
	if c.String("metrics-listen") != "" {
		if mln, err = listen(c, "metrics-listen"); err != nil {
			return err
		}
		defer mln.Close()
	}
	cln, err := listenConsole(c)
	if err != nil {
		return err
	}
	if cln != nil {
		defer cln.Close()
	}
	tp, stopTracing, err := openTracing(c.Context, replica, buildVersion(), log)
	if err != nil {
		return err
	}
	defer func() { // last: the spans of the shutdown itself are flushed
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopTracing(ctx)
	}()
	up, err := openUpstream(c, log, tp)
	if err != nil {
		return err
	}
	// After the drain (the deferred calls run last-in first-out, and this
	// is the first): the child gets SIGTERM once held calls finished, and
	// SIGKILL after --shutdown-timeout.
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.Duration("shutdown-timeout"))
		defer cancel()
		up.close(ctx)
	}()
	fallback, err := fallbackConfig(c, up.Client, log)
	if err != nil {
		return err
	}
	current := policy.NewCurrent(policyCfg)
	// Checked before the store and the gateway exist: a bad value stops
	// serve with nothing started (nothing left running in the process).
	records, err := consoleRecords(c)
	if err != nil {
		return err
	}
	store, err := openStore(c, log, tp)
	if err != nil {
		return err
	}
	defer store.Close()
	dispatcher, err := openWebhooks(c, hooks, hooksFile, store.Store, replica, tp, log)
	if err != nil {
		return err
	}
	h, err := gateway.New(gateway.Config{
		Webhooks:                dispatcher,
		Collectors:              up.collectors(),
		Upstream:                up.Client,
		Store:                   store.Store,
		Policy:                  current, // the reloader below swaps it on SIGHUP or a changed --policy file
		LatencySync:             c.Duration("latency-sync"),
		Trends:                  gateway.TrendsConfig{Off: !c.Bool("trends"), MaxTools: c.Int("trends-max-tools")},
		Path:                    path,
		MaxBody:                 maxBody,
		MaxInflight:             c.Int("max-inflight"),
		MaxInflightPerPrincipal: perPrincipal(c, "max-inflight-per-principal"),
		MaxTaskRate:             pollLimit(c.Float64("max-task-rate")),
		PollLimit:               pollLimit(c.Float64("poll-limit")),
		MetricsPath:             metricsPath(c.String("metrics-listen")),
		Lease:                   c.Duration("lease"),
		LeaseRenew:              c.Duration("lease-renew"),
		MaxAttempts:             c.Int("max-attempts"),
		RerunBackoff:            c.Duration("rerun-backoff"),
		Alone:                   c.String("redis-url") == "", // the embedded store: no other replica
		UpstreamRestartGrace:    c.Duration("upstream-restart-grace"),
		Logger:                  base,
		ReplicaID:               replica,
		AccessLog:               c.Bool("access-log"),
		Version:                 buildVersion(),
		KeepAlive:               door.keepAlive,
		MRTRHold:                c.Duration("mrtr-hold"),
		ReadTimeout:             door.readTimeout,
		AllowedOrigins:          door.origins,
		ListenHost:              listenHost(c.String("listen")),
		Anonymous:               door.anonymous,
		PublicURL:               publicURL,
		TrustedProxies:          proxies,
		Fallback:                fallback,
		Auth:                    authn,
		AuthStrip:               authn != nil && !c.Bool("auth-forward"),
		Tracer:                  tp,

		ReadyRequiresUpstream: c.Bool("ready-requires-upstream"),
	})
	if err != nil {
		return err
	}
	// Every return below before serving ends the gateway's workers and
	// sweeps too; the normal path closes it itself, after the listener.
	served := false
	defer func() {
		if !served {
			_ = h.Close()
		}
	}()
	if up.bridge == nil && up.sse == nil {
		// A wrong URL is in the log (at error, with the fix) before the
		// first client comes; an upstream not up yet is a warning.
		_ = h.CheckUpstream(c.Context)
	}
	if mln != nil {
		mux := http.NewServeMux()
		mux.Handle(gateway.DefaultMetricsPath, h.Metrics())
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = msrv.Serve(mln) }()
		defer msrv.Close()
		log.Info().Str("metrics_listen", mln.Addr().String()).Msg("metrics served at " + gateway.DefaultMetricsPath)
	}
	defer startHeartbeat(store.Store, h, replica, buildVersion(), storeKind(c.String("redis-url")), c.Duration("latency-sync"), cln != nil, records, log)()
	if cln != nil {
		stopConsole, err := serveConsole(c, cln, store.Store, up.Client, current, dispatcher, log)
		if err != nil {
			return err
		}
		defer stopConsole()
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          nil,
	}
	scheme := "http"
	if door.certs != nil {
		scheme = "https"
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: door.certs.getCertificate}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	// Before the store closes (deferred after it): this replica's
	// records of its stdio sessions go with it.
	handler, leave, err := joinReplicas(c, h, up, store, ln.Addr(), scheme, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer leave()
	srv.Handler = handler
	log.Info().Str("listen", ln.Addr().String()).Str("scheme", scheme).Str("upstream", up.name).Str("path", path).
		Str("version", buildVersion()).Bool("tracing", tp != nil).Msg("taskgate serving")

	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if pol.file != "" {
		// Only with a rules file: without one, SIGHUP keeps its default
		// meaning (a closed terminal stops the gateway).
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		rl := &policyReloader{src: pol, cur: current, log: log, last: policyFile, reloaded: h.PolicyReloaded}
		rctx, rstop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); rl.run(rctx, hup, policyCheckEvery) }()
		defer func() { rstop(); <-done }()
	}
	if hooks.file != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		rl := &webhooksReloader{src: hooks, d: dispatcher, log: log, last: hooksFile}
		rctx, rstop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); rl.run(rctx, hup, policyCheckEvery) }()
		defer func() { rstop(); <-done }()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("server stopped: %v", err)
	case <-ctx.Done():
	}
	defer onSecondSignal(log, func() { // a stdio child goes too: SIGTERM, then SIGKILL after a second
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		up.close(ctx)
	})() // before stop: no signal falls between
	stop()
	// Stop accepting at once: the port is free for a new gateway while
	// this one drains. Connections already open are still served (tasks/get
	// of held tasks, held calls): Serve returns, they do not end.
	_ = ln.Close()
	drain(h, c.Duration("drain-timeout"), c.String("redis-url") == "", log)
	// Then the workers stop, before the open connections are closed: the
	// tasks still held are failed with a message saying this replica
	// stopped (lost, with the embedded store), and a client still waiting
	// on tasks/result or polling on its open connection reads that, not a
	// cut connection. Close ends the streams the gateway serves itself
	// (subscriptions/listen) with their closing message too.
	served = true
	_ = h.Close()
	sctx, cancel := context.WithTimeout(context.Background(), c.Duration("shutdown-timeout"))
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Streams still open past the timeout are cut; that is the contract.
		log.Warn().Err(err).Msg("shutdown timed out; open streams were closed")
		_ = srv.Close()
	}
	<-errc // Serve returned when the listener closed
	return nil
}

var timeFormatOnce sync.Once

// newLogger builds the process logger. JSON is the default so logs can be
// shipped as they are; console is for people at a terminal.
func newLogger(format, level string, w io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || level == "" {
		return zerolog.Logger{}, fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", level)
	}
	// The process's one logger setup, written once: zerolog reads this
	// global on every event, so a second write (serve run twice in one
	// process, as the tests do) would race with loggers already running.
	timeFormatOnce.Do(func() { zerolog.TimeFieldFormat = logTimeFormat })
	switch format {
	case "json":
	case "console":
		// Colours only for a person at a terminal, not for a log file.
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: logTimeFormat, NoColor: !isTerminal(w)}
	default:
		return zerolog.Logger{}, fmt.Errorf("invalid --log-format %q: want json or console", format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// logTimeFormat is RFC 3339 with milliseconds: log lines of one request
// are seconds apart only rarely.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && isatty.IsTerminal(f.Fd())
}

// listen opens the listener of the address flag name (--listen,
// --metrics-listen), with errors that name the fix.
func listen(c *cli.Context, name string) (net.Listener, error) {
	addr := c.String(name)
	if err := hostPortError(name, addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		msg := cause(err)
		if errors.Is(err, syscall.EADDRINUSE) {
			msg += ": another process listens there (stop it, or give another --" + name + ")"
		}
		return nil, fmt.Errorf("cannot listen on --%s %s: %s", name, addr, msg)
	}
	return ln, nil
}

// cause strips the operation prefix from a net error, leaving e.g.
// "address already in use".
func cause(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		var se *os.SyscallError
		if errors.As(oe.Err, &se) {
			return se.Err.Error()
		}
		return oe.Err.Error()
	}
	return err.Error()
}

// pollLimit maps --poll-limit (0: none) to gateway.Config.PollLimit
// (negative: none; zero would mean the default), and --max-task-rate to
// MaxTaskRate alike.
func pollLimit(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

// perPrincipal maps a per-principal cap flag (unset: the default
// fraction; 0: none) to its Config or Options field (0: the default;
// negative: none).
func perPrincipal(c *cli.Context, flag string) int {
	switch {
	case !c.IsSet(flag):
		return 0
	case c.Int(flag) == 0:
		return -1
	}
	return c.Int(flag)
}

// metricsPath: the metrics stay on the main listener unless
// --metrics-listen gives them their own.
func metricsPath(metricsListen string) string {
	if metricsListen != "" {
		return "-"
	}
	return gateway.DefaultMetricsPath
}

// frontDoorFlags guard the MCP endpoint (gateway.Config's front-door
// fields, and TLS).
func frontDoorFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "keepalive", Category: catFallback, Value: gateway.DefaultKeepAlive, EnvVars: env("keepalive"),
			Usage: "while a plain tools/call runs, send a keep-alive on its answer stream this often when nothing else was sent: a progress notification when the client gave a progressToken, else an SSE comment (0: off)"},
		&cli.DurationFlag{Name: "read-timeout", Category: catListen, Value: gateway.DefaultReadTimeout, EnvVars: env("read-timeout"),
			Usage: "how long a POSTed body may take to arrive; a slower one gets HTTP 408 (0: no limit)"},
		&cli.StringSliceFlag{Name: "allowed-origins", Category: catListen, EnvVars: env("allowed-origins"),
			Usage: "`ORIGIN`s (https://app.example:8443) whose browser pages may call the endpoint, repeatable or comma-separated; * allows any. Default: requests without Origin, and from localhost or the --listen host; others get 403"},
		&cli.BoolFlag{Name: "allow-anonymous-tasks", Category: catIdentity, Value: true, EnvVars: env("allow-anonymous-tasks"),
			Usage: "run tasks for 2026-07-28 clients that send no Authorization (each such task is its own owner: its id is its credential); false: such clients get plain calls only"},
		&cli.IntFlag{Name: "anonymous-tasks-max", Category: catIdentity, Value: gateway.DefaultAnonymousMax, EnvVars: env("anonymous-tasks-max"),
			Usage: "most anonymous tasks not yet expired, over all replicas (-1: no limit)"},
		&cli.IntFlag{Name: "anonymous-tasks-per-address", Category: catIdentity, Value: gateway.DefaultAnonymousPerAddress, EnvVars: env("anonymous-tasks-per-address"),
			Usage: "most anonymous tasks not yet expired from one client address (-1: no limit)"},
		&cli.StringFlag{Name: "tls-cert", Category: catListen, EnvVars: env("tls-cert"), TakesFile: true,
			Usage: "serve HTTPS with this PEM certificate `FILE` (with --tls-key); reloaded when it changes"},
		&cli.StringFlag{Name: "tls-key", Category: catListen, EnvVars: env("tls-key"), TakesFile: true,
			Usage: "PEM private key `FILE` of --tls-cert"},
	}
}

// door is what the front-door flags say.
type door struct {
	keepAlive   time.Duration
	readTimeout time.Duration
	origins     []string
	anonymous   gateway.AnonymousTasks
	certs       *certReloader // nil: plain HTTP
}

func frontDoor(c *cli.Context, log zerolog.Logger) (door, error) {
	d := door{keepAlive: c.Duration("keepalive"), readTimeout: c.Duration("read-timeout"), origins: c.StringSlice("allowed-origins")}
	switch {
	case d.keepAlive < 0:
		return d, fmt.Errorf("invalid --keepalive %s: it must not be negative", d.keepAlive)
	case d.keepAlive == 0:
		d.keepAlive = -1 // gateway.Config: negative is "off"
	}
	switch {
	case d.readTimeout < 0:
		return d, fmt.Errorf("invalid --read-timeout %s: it must not be negative", d.readTimeout)
	case d.readTimeout == 0:
		d.readTimeout = -1 // gateway.Config: negative is "no limit"
	}
	for _, o := range d.origins {
		if strings.TrimSpace(o) == "" {
			return d, fmt.Errorf("invalid --allowed-origins: an empty origin")
		}
	}
	d.anonymous = gateway.AnonymousTasks{Disabled: !c.Bool("allow-anonymous-tasks"),
		Max: c.Int("anonymous-tasks-max"), PerAddress: c.Int("anonymous-tasks-per-address")}
	for name, n := range map[string]int{"anonymous-tasks-max": d.anonymous.Max, "anonymous-tasks-per-address": d.anonymous.PerAddress} {
		if n == 0 || n < -1 {
			return d, fmt.Errorf("invalid --%s %d: want a positive count, or -1 for no limit (--allow-anonymous-tasks=false allows none)", name, n)
		}
	}
	cert, key := c.String("tls-cert"), c.String("tls-key")
	if (cert == "") != (key == "") {
		return d, fmt.Errorf("--tls-cert and --tls-key go together: give both or neither")
	}
	if cert != "" {
		r, err := newCertReloader(cert, key, log)
		if err != nil {
			return d, err
		}
		d.certs = r
	}
	return d, nil
}

// listenHost is the host part of --listen ("" when it has none).
func listenHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return host
}

// replicaID is --replica-id, or the hostname: it names the replica in
// leases and in the store's latency samples, so it must be printable and
// short.
func replicaID(flag string) (string, error) {
	id := flag
	if id == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return "", fmt.Errorf("cannot read the hostname for the replica id (%v): give --replica-id", err)
		}
		id = h
	}
	if len(id) > 64 {
		return "", fmt.Errorf("invalid --replica-id %q: at most 64 characters", id)
	}
	for _, r := range id {
		if r <= ' ' || r > '~' {
			return "", fmt.Errorf("invalid --replica-id %q: only printable ASCII without spaces", id)
		}
	}
	return id, nil
}
