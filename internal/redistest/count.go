package redistest

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// CountHook counts in N the commands a Redis client sends, each command of
// a pipeline as one (rdb.AddHook(redistest.CountHook{N: &n})).
type CountHook struct{ N *atomic.Int64 }

func (CountHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c CountHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.N.Add(1)
		return next(ctx, cmd)
	}
}

func (c CountHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.N.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
