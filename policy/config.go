package policy

import (
	"sync/atomic"
	"time"
)

// Defaults for the Config fields left zero.
const (
	DefaultAutoAfter  = 2 * time.Second
	DefaultHybridWait = 1 * time.Second
)

// Bounds of the pollInterval suggested from a tool's learned latency, and
// the shortest hybrid wait learned latency can bring about.
const (
	MinPollInterval = 250 * time.Millisecond
	MaxPollInterval = 30 * time.Second
	MinHybridWait   = 10 * time.Millisecond
)

// Config is everything Decide reads besides the call itself. A Config is
// not changed once it is in use: to change the policy, build a new one and
// Store it in a Current.
type Config struct {
	// Rules, first match wins: the rule flags, then the rules file.
	Rules Rules
	// AutoAfter: a tool that matches no rule and whose learned p95 exceeds
	// it is a task candidate (--auto-after). Zero means DefaultAutoAfter;
	// negative turns latency-based promotion off.
	AutoAfter time.Duration
	// HybridWait is the longest a modern client's auto call is held before
	// it becomes a task (--hybrid-wait). Zero means DefaultHybridWait.
	HybridWait time.Duration
	// DefaultPoll is the pollInterval for a tool no rule sets one for and
	// whose latency is unknown (--poll-interval). Zero leaves
	// Decision.PollInterval zero there: the store's default applies.
	DefaultPoll time.Duration
}

func (c *Config) autoAfter() time.Duration {
	if c.AutoAfter == 0 {
		return DefaultAutoAfter
	}
	return c.AutoAfter
}

func (c *Config) hybridWait() time.Duration {
	if c.HybridWait <= 0 {
		return DefaultHybridWait
	}
	return c.HybridWait
}

// Current holds the Config in force. The gateway reads it on every call;
// a reload (SIGHUP, a changed rules file) replaces it whole, so a call sees
// either the old rules or the new ones, never a mix, and tasks already
// created are untouched. Safe for concurrent use; the zero value holds an
// empty Config.
type Current struct {
	p atomic.Pointer[Config]
}

// NewCurrent returns a Current holding cfg.
func NewCurrent(cfg *Config) *Current {
	c := &Current{}
	c.Store(cfg)
	return c
}

// Load returns the Config in force; never nil.
func (c *Current) Load() *Config {
	if cfg := c.p.Load(); cfg != nil {
		return cfg
	}
	return &Config{}
}

// Store puts cfg in force. The caller must not change cfg afterwards.
func (c *Current) Store(cfg *Config) {
	c.p.Store(cfg)
}

// Decide is Decide with the Config in force.
func (c *Current) Decide(tool Tool, client ClientKind, upstream TaskSupport, stats Stats) Decision {
	return Decide(c.Load(), tool, client, upstream, stats)
}
