package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway"
)

// drain refuses new tasks (/readyz says 503, so load balancers move on)
// and lets held calls finish for up to timeout. alone (the embedded
// store): no other replica can run a task again, so the log says plainly
// that what remains is lost, not that another replica takes it.
func drain(h *gateway.Handler, timeout time.Duration, alone bool, log zerolog.Logger) {
	ev := log.Info().Str("op", "drain").Float64("drain_timeout_seconds", timeout.Seconds())
	if alone {
		ev.Msg("shutting down: draining; with the embedded store, tasks still running after the drain are lost")
	} else {
		ev.Msg("shutting down: draining")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := h.Drain(ctx); err == nil {
		return
	}
	if alone {
		log.Warn().Str("op", "drain").Msg("drain timed out; the tasks still held are failed and lost: with the embedded store no other replica can run them again")
		return
	}
	log.Warn().Str("op", "drain").Msg("drain timed out; the tasks still held are failed")
}

// onSecondSignal makes a second SIGINT or SIGTERM during the shutdown end
// the process at once (exit status 1), saying so, after last (bounded by
// the caller: it stops a stdio child, which would outlive the process);
// the returned func stops watching.
func onSecondSignal(log zerolog.Logger, last func()) func() {
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-again:
			log.Warn().Str("op", "drain").Str("signal", sig.String()).Msg("second signal: stopping at once; tasks still held are not failed")
			last()
			os.Exit(1)
		case <-done:
		}
	}()
	return func() { signal.Stop(again); close(done) }
}
