package gateway

// The gateway's side of durable tasks (docs/durable.md): what the runner
// (internal/runner, rerun.go) asks of the parts it does not own — whether
// a tool is rerunnable (the rules in force and the catalogue's
// annotations), the principals' freshest tokens, a new owner session.

import (
	"context"
	"errors"
	"net/http"

	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/policy"
)

// Defaults of Config.MaxAttempts and Config.RerunBackoff.
const (
	DefaultMaxAttempts  = runner.DefaultMaxAttempts
	DefaultRerunBackoff = runner.DefaultRerunBackoff
)

// DefaultUpstreamRestartGrace is Config.UpstreamRestartGrace's default.
const DefaultUpstreamRestartGrace = runner.DefaultRestartGrace

// LostMessage is the statusMessage of a task a replica stopped under when
// Config.Alone (no other replica can run it again).
const LostMessage = runner.LostMessage

// durable is the runner's Durable for h and its config c.
func (h *Handler) durable(c Config) runner.Durable {
	d := runner.Durable{MaxAttempts: c.MaxAttempts, Backoff: c.RerunBackoff, Reruns: h.metrics.NewReruns(),
		Rerunnable: h.rerunnable, Reopen: h.reopenOwnerTarget}
	if h.creds != nil {
		d.CredKey, d.Freshest = h.creds.KeyOf, h.creds.Freshest
	}
	return d
}

// rerunnable is the verdict on tool with the rules in force and the
// annotations the catalogue holds.
func (h *Handler) rerunnable(ctx context.Context, tool string) (bool, string) {
	decl, _ := h.decider.ToolInfo(ctx, tool)
	return policy.Rerunnable(h.decider.Policy.Load(), decl.Tool(tool))
}

// reopenOwnerTarget is the upstream side's ReopenTarget for a 2026-07-28
// client's rerun.
func (h *Handler) reopenOwnerTarget(ctx context.Context, owner string, auth http.Header, stale *upstreamside.Target) (*upstreamside.Target, error) {
	if h.up == nil {
		return nil, errors.New("no upstream side")
	}
	return h.up.ReopenTarget(ctx, owner, auth, "", stale)
}
