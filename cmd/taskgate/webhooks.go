package main

// Webhooks (package webhook, docs/webhooks.md): the endpoints of the
// flags and of --webhooks FILE, the Dispatcher that delivers to them, and
// the file's reloads.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/webhook"
)

// maxWebhooksFile bounds the --webhooks file: it is read again on every
// change.
const maxWebhooksFile = 1 << 20

// flagEndpoint is the name of the endpoint the --webhook-* flags make.
const flagEndpoint = "default"

func webhookFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "webhook-url", Category: catWebhooks, EnvVars: env("webhook-url"),
			Usage: "`URL` (http or https) that receives signed task events (Standard Webhooks); with --webhook-secret. Named \"" + flagEndpoint + "\" in metrics and the console"},
		&cli.StringSliceFlag{Name: "webhook-secret", Category: catWebhooks, EnvVars: env("webhook-secret"),
			Usage: "`SECRET` (whsec_ then base64 of 24 to 64 bytes) that signs --webhook-url's deliveries; repeat it while rotating (every delivery carries a signature per secret). Never logged"},
		&cli.StringSliceFlag{Name: "webhook-events", Category: catWebhooks, EnvVars: env("webhook-events"),
			Usage: "`EVENT`s sent to --webhook-url: task.created, task.input_required, task.completed, task.failed, task.cancelled, task.rerun (repeatable, or comma-separated; default all)"},
		&cli.StringSliceFlag{Name: "webhook-tools", Category: catWebhooks, EnvVars: env("webhook-tools"),
			Usage: "tool `GLOB`s whose tasks' events go to --webhook-url (the rules' globs; default all)"},
		&cli.StringSliceFlag{Name: "webhook-principals", Category: catWebhooks, EnvVars: env("webhook-principals"),
			Usage: "`OWNER`s whose tasks' events go to --webhook-url: principal:<64 hex> or auth:<64 hex> (default all)"},
		&cli.StringFlag{Name: "webhooks", Category: catWebhooks, EnvVars: env("webhooks"),
			Usage: "endpoints `FILE` (JSON, see docs/webhooks.md), besides --webhook-url; reloaded on SIGHUP and when it changes"},
		&cli.DurationFlag{Name: "webhook-retry-for", Category: catWebhooks, Value: webhook.DefaultRetryFor, EnvVars: env("webhook-retry-for"),
			Usage: "how long a failing delivery is retried (exponential backoff with jitter, the first retry within 5s) before it is kept as a dead letter"},
		&cli.DurationFlag{Name: "webhook-timeout", Category: catWebhooks, Value: webhook.DefaultTimeout, EnvVars: env("webhook-timeout"),
			Usage: "longest one delivery may take, connection to answer"},
		&cli.IntFlag{Name: "webhook-concurrency", Category: catWebhooks, Value: webhook.DefaultConcurrency, EnvVars: env("webhook-concurrency"),
			Usage: "most deliveries in flight at once per endpoint on this replica"},
		&cli.StringFlag{Name: "console-url", Category: catWebhooks, EnvVars: env("console-url"),
			Usage: "the console's public base `URL` (https://taskgate-console.example.com), so each delivery links its task's console page"},
	}
}

// webhookSource builds the endpoints in force: the flags' one, fixed at
// startup, then those of --webhooks, read again on each reload.
type webhookSource struct {
	file string
	flag []webhook.Endpoint // the --webhook-url endpoint, or none
}

func newWebhookSource(c *cli.Context) (*webhookSource, error) {
	s := &webhookSource{file: c.String("webhooks")}
	u := c.String("webhook-url")
	for _, name := range []string{"webhook-secret", "webhook-events", "webhook-tools", "webhook-principals"} {
		if u == "" && len(c.StringSlice(name)) > 0 {
			return nil, fmt.Errorf("--%s needs --webhook-url (endpoints of --webhooks FILE carry their own)", name)
		}
	}
	if u != "" {
		e := webhook.Endpoint{Name: flagEndpoint, URL: u, Secrets: c.StringSlice("webhook-secret"),
			Events: c.StringSlice("webhook-events"), Tools: c.StringSlice("webhook-tools"), Principals: c.StringSlice("webhook-principals")}
		if err := e.Check(); err != nil {
			return nil, flagError(err)
		}
		s.flag = []webhook.Endpoint{e}
	}
	for _, name := range []string{"webhook-retry-for", "webhook-timeout"} {
		if c.Duration(name) <= 0 {
			return nil, fmt.Errorf("invalid --%s %s: it must be positive", name, c.Duration(name))
		}
	}
	if n := c.Int("webhook-concurrency"); n <= 0 {
		return nil, fmt.Errorf("invalid --webhook-concurrency %d: it must be positive", n)
	}
	if v := c.String("console-url"); v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("invalid --console-url %q: want the console's http(s) base URL", v)
		}
	}
	return s, nil
}

// flagError names the flag behind an endpoint's field error: secrets[1]
// is the second --webhook-secret.
func flagError(err error) error {
	var fe *webhook.FieldError
	if !errors.As(err, &fe) {
		return fmt.Errorf("invalid --webhook-url: %v", err)
	}
	field, index, _ := strings.Cut(fe.Field, "[")
	flag := map[string]string{"url": "webhook-url", "secrets": "webhook-secret", "events": "webhook-events",
		"tools": "webhook-tools", "principals": "webhook-principals"}[field]
	if index != "" {
		n, _ := strconv.Atoi(strings.TrimSuffix(index, "]"))
		return fmt.Errorf("invalid --%s #%d: %s", flag, n+1, fe.Msg)
	}
	return fmt.Errorf("invalid --%s: %s", flag, fe.Msg)
}

// on reports whether any endpoint may be configured: the store then
// records events.
func (s *webhookSource) on() bool { return len(s.flag) > 0 || s.file != "" }

// read returns the --webhooks file's content (nil without one).
func (s *webhookSource) read() ([]byte, error) {
	if s.file == "" {
		return nil, nil
	}
	f, err := os.Open(s.file)
	if err != nil {
		return nil, fmt.Errorf("cannot read --webhooks %s: %v", s.file, pathCause(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxWebhooksFile+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read --webhooks %s: %v", s.file, pathCause(err))
	}
	if len(data) > maxWebhooksFile {
		return nil, fmt.Errorf("invalid --webhooks %s: larger than 1MiB", s.file)
	}
	return data, nil
}

// build returns the endpoints for the file's content data: the flags'
// first, then the file's.
func (s *webhookSource) build(data []byte) ([]webhook.Endpoint, error) {
	eps := append([]webhook.Endpoint(nil), s.flag...)
	if s.file == "" {
		return eps, nil
	}
	fileEps, err := webhook.ParseFile(s.file, data)
	if err != nil {
		return nil, fmt.Errorf("invalid --webhooks: %v", err)
	}
	eps = append(eps, fileEps...)
	if err := webhook.CheckEndpoints(eps); err != nil {
		return nil, fmt.Errorf("invalid --webhooks %s: %v (--webhook-url's endpoint is named %q)", s.file, err, flagEndpoint)
	}
	return eps, nil
}

// openWebhooks builds the Dispatcher (nil without any endpoint source);
// the gateway starts and stops it.
func openWebhooks(c *cli.Context, src *webhookSource, data []byte, store *taskstore.Store, replica string,
	tp trace.TracerProvider, log zerolog.Logger) (*webhook.Dispatcher, error) {
	if !src.on() {
		return nil, nil
	}
	eps, err := src.build(data)
	if err != nil {
		return nil, err
	}
	return webhook.New(webhook.Config{
		Store: store, Endpoints: eps, Consumer: replica, ConsoleURL: c.String("console-url"),
		RetryFor: c.Duration("webhook-retry-for"), Timeout: c.Duration("webhook-timeout"),
		Concurrency: c.Int("webhook-concurrency"), Tracer: tp, Logger: log,
	})
}

// webhooksReloader puts a changed --webhooks file in force, like the
// rules file (policyReloader): on SIGHUP, and when its content changed.
// A file that does not read or parse is logged, and the endpoints in
// force stay.
type webhooksReloader struct {
	src     *webhookSource
	d       *webhook.Dispatcher
	log     zerolog.Logger
	last    []byte
	lastErr string
}

func (r *webhooksReloader) run(ctx context.Context, hup <-chan os.Signal, every time.Duration) {
	watchFile(ctx, hup, every, r.reload)
}

func (r *webhooksReloader) reload(forced bool) {
	data, err := r.src.read()
	if err == nil && !forced && bytes.Equal(data, r.last) {
		r.lastErr = ""
		return
	}
	var eps []webhook.Endpoint
	if err == nil {
		r.last = data
		if eps, err = r.src.build(data); err == nil {
			err = r.d.SetEndpoints(eps)
		}
	}
	if err != nil {
		if forced || err.Error() != r.lastErr {
			r.log.Error().Str("op", "webhook").Str("file", r.src.file).Err(err).Msg("webhooks not reloaded; the previous endpoints stay in force")
		}
		r.lastErr = err.Error()
		return
	}
	r.lastErr = ""
	r.log.Info().Str("op", "webhook").Str("file", r.src.file).Int("endpoints", len(eps)).Bool("sighup", forced).Msg("webhooks reloaded")
}
