package runner

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// failScriptHook answers the first Left scripts (EVALSHA, EVAL) with an
// argument starting with Match with LOADING, as a restarting Redis does,
// without sending them. With LostReply it sends them, and Redis runs them,
// but the caller gets io.EOF instead of the reply, as when Redis dies
// between running a script and answering.
type failScriptHook struct {
	Match     string
	Left      int64
	LostReply bool
	Failed    atomic.Int64
}

func (*failScriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failScriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := strings.ToLower(cmd.Name())
		if name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		for _, a := range cmd.Args() {
			if s, ok := a.(string); ok && strings.HasPrefix(s, f.Match) {
				if f.Failed.Load() < f.Left {
					err := errors.New("LOADING Redis is loading the dataset in memory")
					if f.LostReply {
						if ran := next(ctx, cmd); ran != nil {
							return ran // not run (e.g. NOSCRIPT: go-redis sends EVAL next)
						}
						err = io.EOF
					}
					f.Failed.Add(1)
					cmd.SetErr(err)
					return err
				}
			}
		}
		return next(ctx, cmd)
	}
}

func (*failScriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// taskKey finds the Redis key of task id's hash (its key names the owner
// by a digest), or "none".
func taskKey(rdb *redis.Client, id string) string {
	keys, _ := rdb.Keys(context.Background(), "tg:*:t:"+id).Result()
	if len(keys) != 1 {
		return "none"
	}
	return keys[0]
}
