package gwtest

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CommandCounter counts the commands a Store sends, by name.
type CommandCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// NewCommandCounter counts from none.
func NewCommandCounter() *CommandCounter { return &CommandCounter{n: map[string]int{}} }

// DialHook, ProcessHook and ProcessPipelineHook make it a redis.Hook.
func (*CommandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *CommandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.n[strings.ToLower(cmd.Name())]++
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (*CommandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Reset returns the counts so far and starts again from none.
func (c *CommandCounter) Reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.n
	c.n = map[string]int{}
	return old
}
