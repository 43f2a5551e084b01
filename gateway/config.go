package gateway

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/upstream"
)

// DefaultMaxBody is the default limit on a POSTed body: 4 MiB, as the
// go-sdk's streamable server uses.
const DefaultMaxBody = 4 << 20

// DefaultPath is where MCP is served when Config.Path is empty.
const DefaultPath = "/mcp"

// Store is what the gateway needs of the task store. It grows with the
// task features; today it only answers readiness.
type Store interface {
	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
}

// Config configures a Handler. Only Upstream is required; every other field
// says what happens when it is unset.
type Config struct {
	// Upstream is the client of the fronted MCP server. Required.
	Upstream *upstream.Client
	// Store holds task state. Nil means no store, and /readyz checks only
	// the upstream.
	Store Store
	// Path is where MCP is served. Empty means DefaultPath.
	Path string
	// MaxBody bounds a POSTed body in bytes; larger bodies get 413.
	// Zero means DefaultMaxBody.
	MaxBody int64
	// Logger receives one line per failed request and lifecycle events.
	// The zero value logs nothing.
	Logger zerolog.Logger
}

func (c *Config) withDefaults() Config {
	cfg := *c
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	return cfg
}
