package main

import (
	"bytes"
	"context"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/policy"
)

// policyReloader puts a changed rules file in force: on SIGHUP, and when
// the file's content differs from what was last read (checked on a
// timer, which also catches editors that replace the file). The new
// Config replaces the old one whole (policy.Current), so running tasks
// are untouched and the next call sees the new rules. A file that does
// not read or parse is logged and the rules in force stay.
type policyReloader struct {
	src      *policySource
	cur      *policy.Current
	log      zerolog.Logger
	reloaded func(ok bool) // counts reloads (taskgate_policy_reloads_total); nil: not counted

	last    []byte // content last read
	lastErr string // last error logged by a timed check, so it is logged once
}

// run reloads until ctx ends: on each signal from hup (always, even if
// the file did not change) and every interval when the file changed.
// The caller waits for run to return.
func (r *policyReloader) run(ctx context.Context, hup <-chan os.Signal, every time.Duration) {
	watchFile(ctx, hup, every, r.reload)
}

// watchFile calls reload(true) on each signal from hup and reload(false)
// every interval (the reloader compares the content), until ctx ends: the
// loop of every reloaded file (the rules, --webhooks).
func watchFile(ctx context.Context, hup <-chan os.Signal, every time.Duration, reload func(forced bool)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload(true)
		case <-tick.C:
			reload(false)
		}
	}
}

// reload reads the rules file and, when forced or when it changed, puts
// its rules in force.
func (r *policyReloader) reload(forced bool) {
	data, err := r.src.read()
	if err != nil {
		r.fail(forced, err)
		return
	}
	if !forced && bytes.Equal(data, r.last) {
		r.lastErr = ""
		return
	}
	r.last = data
	cfg, err := r.src.build(data)
	if err != nil {
		r.fail(forced, err)
		return
	}
	r.lastErr = ""
	r.cur.Store(cfg)
	if r.reloaded != nil {
		r.reloaded(true)
	}
	r.log.Info().Str("op", "policy").Str("file", r.src.file).Int("rules", len(cfg.Rules)).Bool("sighup", forced).
		Msg("policy reloaded")
}

func (r *policyReloader) fail(forced bool, err error) {
	if !forced && err.Error() == r.lastErr {
		return
	}
	if r.reloaded != nil {
		r.reloaded(false)
	}
	r.lastErr = err.Error()
	r.log.Error().Str("op", "policy").Str("file", r.src.file).Err(err).Msg("policy not reloaded; the previous rules stay in force")
}
