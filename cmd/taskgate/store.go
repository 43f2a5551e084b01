package main

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/taskstore"
)

func storeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "redis-url", Category: catStore, EnvVars: env("redis-url"),
			Usage: "`URL` of the Redis shared by all replicas: redis://host:6379/0, rediss://…, redis+cluster://h1:p,h2:p, redis+sentinel://s1:26379,s2:26379/master. Unset: an embedded in-memory store (single replica, lost on exit)"},
		&cli.DurationFlag{Name: "default-ttl", Category: catTasks, Value: taskstore.DefaultTTL, EnvVars: env("default-ttl"),
			Usage: "task lifetime when the client asks for none"},
		&cli.DurationFlag{Name: "max-ttl", Category: catTasks, Value: taskstore.DefaultMaxTTL, EnvVars: env("max-ttl"),
			Usage: "longest task lifetime granted; longer requests are clamped"},
		&cli.DurationFlag{Name: "poll-interval", Category: catTasks, Value: taskstore.DefaultPollInterval, EnvVars: env("poll-interval"),
			Usage: "pollInterval suggested to clients"},
		&cli.IntFlag{Name: "max-tasks-per-owner", Category: catTasks, Value: taskstore.DefaultMaxTasksPerOwner, EnvVars: env("max-tasks-per-owner"),
			Usage: "live (non-terminal) tasks one owner may have; negative means no limit"},
		&cli.StringFlag{Name: "max-result-bytes", Category: catTasks, Value: "8MiB", EnvVars: env("max-result-bytes"),
			Usage: "largest tool result a task stores (`SIZE`: 8388608, 512KiB, 8MiB); a larger one fails the task with a clear error"},
	}
}

// openedStore is the task store and what must be closed after it.
type openedStore struct {
	*taskstore.Store
	closers []func() error
}

func (o *openedStore) Close() {
	_ = o.Store.Close()
	for i := len(o.closers) - 1; i >= 0; i-- {
		_ = o.closers[i]()
	}
}

// openStore connects to --redis-url, or starts the embedded store.
// Its Redis commands are traced with tp (nil: not traced).
func openStore(c *cli.Context, log zerolog.Logger, tp trace.TracerProvider) (*openedStore, error) {
	for _, name := range []string{"default-ttl", "max-ttl", "poll-interval"} {
		if c.Duration(name) <= 0 {
			return nil, fmt.Errorf("invalid --%s %s: it must be positive", name, c.Duration(name))
		}
	}
	if c.Duration("default-ttl") > c.Duration("max-ttl") {
		return nil, fmt.Errorf("--default-ttl %s is longer than --max-ttl %s", c.Duration("default-ttl"), c.Duration("max-ttl"))
	}
	maxResult, err := sizeFlag(c, "max-result-bytes")
	if err != nil {
		return nil, err
	}
	if maxResult > 512<<20 {
		return nil, fmt.Errorf("invalid --max-result-bytes %s: Redis values are limited to 512MiB", c.String("max-result-bytes"))
	}
	opts := taskstore.Options{
		DefaultTTL:       c.Duration("default-ttl"),
		MaxTTL:           c.Duration("max-ttl"),
		PollInterval:     c.Duration("poll-interval"),
		MaxTasksPerOwner: c.Int("max-tasks-per-owner"),
		MaxResultBytes:   int(maxResult),
		Logger:           log,
	}
	auto, err := consoleRecords(c)
	if err != nil {
		return nil, err
	}
	opts.NoOpsRecords = !auto.on
	// With an endpoint, the status-change scripts record each event in
	// the owner's outbox (docs/webhooks.md). Commands without the webhook
	// flags read "" here.
	opts.Webhooks = c.String("webhook-url") != "" || c.String("webhooks") != ""
	redis.SetLogger(redisLogger{log})
	out := &openedStore{}
	var rdb redis.UniversalClient
	if url := c.String("redis-url"); url != "" {
		ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
		defer cancel()
		rdb, err = taskstore.Dial(ctx, url)
		if errors.Is(err, taskstore.ErrUnavailable) {
			return nil, fmt.Errorf("cannot reach Redis at --redis-url %s: %s", taskstore.RedactURL(url), lastCause(err))
		}
		if err != nil {
			return nil, fmt.Errorf("invalid --redis-url: %s", strings.TrimPrefix(err.Error(), "taskstore: "))
		}
		out.closers = append(out.closers, rdb.Close)
	} else {
		emb, err := taskstore.OpenEmbedded(log)
		if err != nil {
			return nil, fmt.Errorf("cannot start the embedded store: %v", err)
		}
		out.closers = append(out.closers, emb.Close) // closes its client too
		rdb = emb.Client()
	}
	if err := traceRedis(rdb, tp); err != nil {
		out.Close()
		return nil, fmt.Errorf("cannot trace the task store's Redis commands: %v", err)
	}
	out.Store = taskstore.New(rdb, opts)
	if auto.auto && !auto.on { // another replica's console, announced?
		ctx, cancel := context.WithTimeout(c.Context, 5*time.Second)
		if on, err := out.Store.ConsoleAnnounced(ctx); err == nil && on {
			out.Store.SetOpsRecords(true)
		}
		cancel()
	}
	return out, nil
}

// lastCause is the innermost reason in an error chain's text, e.g.
// "connection refused".
func lastCause(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// redisLogger sends go-redis' internal messages (pool dial failures,
// reconnects) to our log at debug: the store reports what matters itself.
type redisLogger struct{ log zerolog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug().Str("op", "redis").Msgf(format, v...)
}
