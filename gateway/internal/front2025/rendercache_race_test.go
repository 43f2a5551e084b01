package front2025

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// keyCounter counts the commands whose first key is a task record.
type keyCounter struct{ n atomic.Int64 }

func (*keyCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *keyCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *keyCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *keyCounter) count(cmd redis.Cmder) {
	if args := cmd.Args(); len(args) > 1 {
		if k, ok := args[1].(string); ok && strings.Contains(k, ":t:") {
			c.n.Add(1)
		}
	}
}

// pollOnce is one tasks/get of a 2025-11-25 session's task, for
// goroutines: the task's status, or found false for a -32602.
func pollOnce(url, sid, id string) (status string, found bool, err error) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": map[string]any{"taskId": id}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false, err
	}
	var m gwtest.Reply
	if err := gwtest.ScanMessages(resp, func(r gwtest.Reply) bool { m = r; return false }); err != nil {
		return "", false, err
	}
	if m.Error != nil {
		if m.Error.Code == -32602 {
			return "", false, nil
		}
		return "", false, fmt.Errorf("tasks/get %s: %d %s", id, m.Error.Code, m.Error.Message)
	}
	var wt gwtest.WireTask
	if err := json.Unmarshal(m.Result, &wt); err != nil {
		return "", false, err
	}
	return wt.Status, true, nil
}

// TestTerminalCacheRaces: two replicas on a real redis-server. Replica A
// answers polls of terminal tasks from its render cache without Redis;
// cancels through replica B, expiries and removals race A's polls, and A
// never answers what Redis no longer holds or no longer says.
func TestTerminalCacheRaces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	addr := redistest.Start(t)
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	fl := newFleet(t, up.URL+"/mcp")
	cmdsA := &keyCounter{} // replica A's commands on task records
	fl.Redis = func() redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		if len(fl.Rs) == 0 {
			rdb.AddHook(cmdsA)
		}
		return rdb
	}
	pol := func(c *frontrig.Config) {
		c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "echo", policy.Task, "slow", policy.Task))
	}
	a, b := fl.Add(pol), fl.Add(pol)
	for _, h := range []*frontrig.Replica{a, b} {
		gwtest.WaitFor(t, func() bool { return h.Deps.Renders.Live() })
	}
	c := &gwtest.Client{T: t, URLs: fl.URLs[:1]}
	c.Initialize()
	onB := &gwtest.Client{T: t, URLs: fl.URLs[1:], SID: c.SID}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	keyOf := func(id string) string {
		keys, err := rdb.Keys(ctx, "tg:*:t:"+id).Result()
		if err != nil || len(keys) != 1 {
			t.Fatalf("task %s: keys %v %v", id, keys, err)
		}
		return keys[0]
	}
	start := func(tool string, args map[string]any, ttl int) string {
		r := c.Call("tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": ttl}})
		var res struct {
			Task gwtest.WireTask `json:"task"`
		}
		if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.Task.TaskID == "" {
			t.Fatalf("tools/call %s as task: %+v %s", tool, r.Error, r.Result)
		}
		return res.Task.TaskID
	}
	urlA := fl.URLs[0]

	t.Run("zero round trips", func(t *testing.T) {
		id := start("echo", map[string]any{"text": "x"}, 60000)
		c.WaitStatus(id, "completed")
		// The worker releases its lease after the outcome is visible: a
		// command on the record that is not a poll's.
		key := keyOf(id)
		gwtest.WaitFor(t, func() bool { v, _ := rdb.HGet(ctx, key, "lease_holder").Result(); return v == "" })
		c.GetTask(id) // rendered and cached
		cmdsA.n.Store(0)
		for i := 0; i < 50; i++ {
			if st, found, err := pollOnce(urlA, c.SID, id); err != nil || !found || st != "completed" {
				t.Fatalf("poll: %s %v %v", st, found, err)
			}
		}
		// The replica's own background work (lease sweeps, session
		// touches) may send commands meanwhile; none reads a task.
		if n := cmdsA.n.Load(); n != 0 {
			t.Errorf("50 polls of a cached completed task sent %d commands on task records, want none", n)
		}
	})

	t.Run("cancel on the other replica", func(t *testing.T) {
		const tasks = 16
		var wg sync.WaitGroup
		seen := make([][]string, tasks)
		ids := make([]string, tasks)
		errs := make(chan error, 2*tasks)
		for i := range ids {
			ids[i] = start("slow", map[string]any{"seconds": rand.Float64() * 0.05, "text": "x"}, 60000)
		}
		for i, id := range ids {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for p := 0; p < 40; p++ {
					st, found, err := pollOnce(urlA, c.SID, id)
					if err != nil || !found {
						errs <- fmt.Errorf("poll %s: %q %v %v", id, st, found, err)
						return
					}
					seen[i] = append(seen[i], st)
					time.Sleep(time.Millisecond)
				}
			}()
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
				b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": map[string]any{"taskId": id}})
				req, _ := http.NewRequest(http.MethodPost, fl.URLs[1], bytes.NewReader(b))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Session-Id", onB.SID)
				req.Header.Set("MCP-Protocol-Version", "2025-11-25")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		cancelled := 0
		for i, id := range ids {
			final, err := rdb.HGet(ctx, keyOf(id), "status").Result()
			if err != nil {
				t.Fatal(err)
			}
			if final == "cancelled" {
				cancelled++
			}
			terminal := ""
			for _, st := range seen[i] {
				switch {
				case st == "working" && terminal != "":
					t.Errorf("task %s: A answered working after %s: %v", id, terminal, seen[i])
				case st != "working":
					if st != final {
						t.Errorf("task %s: A answered %s, Redis says %s: %v", id, st, final, seen[i])
					}
					terminal = st
				}
			}
			// After the race, A agrees with Redis from its cache too.
			if st, found, err := pollOnce(urlA, c.SID, id); err != nil || !found || st != final {
				t.Errorf("task %s after the race: A answers %q (found %v, %v), Redis %s", id, st, found, err, final)
			}
		}
		t.Logf("%d of %d tasks cancelled before they completed", cancelled, tasks)
	})

	t.Run("expiry", func(t *testing.T) {
		// ttl 3 s: the cache answers alone until ZeroRTTSkew before the
		// expiry, then the stamp decides.
		const tasks = 6
		var wg sync.WaitGroup
		errs := make(chan error, 2*tasks)
		for i := 0; i < tasks; i++ {
			id := start("echo", map[string]any{"text": "x"}, 3000)
			key := keyOf(id)
			var goneAt atomic.Int64 // unix ns when Redis was first seen without the task
			wg.Add(2)
			go func() {
				defer wg.Done()
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
					if n, err := rdb.Exists(ctx, key).Result(); err == nil && n == 0 {
						goneAt.Store(time.Now().UnixNano())
						return
					}
				}
				errs <- fmt.Errorf("task %s never expired in Redis", id)
			}()
			go func() {
				defer wg.Done()
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(3 * time.Millisecond) {
					sent := time.Now().UnixNano()
					st, found, err := pollOnce(urlA, c.SID, id)
					if err != nil {
						errs <- err
						return
					}
					if g := goneAt.Load(); found && g != 0 && sent > g {
						errs <- fmt.Errorf("task %s: a poll sent %v after Redis dropped it answered %s", id, time.Duration(sent-g), st)
						return
					}
					if !found && goneAt.Load() != 0 {
						return
					}
				}
				errs <- fmt.Errorf("task %s still answered after 10 s", id)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("removal", func(t *testing.T) {
		// A script that removes a task record announces it (as abandonCmd
		// does); the removals race polls of the cached tasks.
		remove := redis.NewScript(`if redis.call('DEL', KEYS[1]) == 1 then redis.call('PUBLISH', ARGV[1], ARGV[2]) end return 0`)
		const tasks = 8
		ids := make([]string, tasks)
		for i := range ids {
			ids[i] = start("echo", map[string]any{"text": "x"}, 60000)
			c.WaitStatus(ids[i], "completed")
			c.GetTask(ids[i])
		}
		var wg sync.WaitGroup
		errs := make(chan error, tasks)
		removed := make([]atomic.Bool, tasks)
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				gone := false
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
					st, found, err := pollOnce(urlA, c.SID, id)
					switch {
					case err != nil:
						errs <- err
						return
					case found && gone:
						errs <- fmt.Errorf("task %s: answered %s again after not found", id, st)
						return
					case !found && !removed[i].Load():
						errs <- fmt.Errorf("task %s: not found before its removal", id)
						return
					case !found:
						if gone { // twenty not-founds in a row: done
							return
						}
						gone = true
						for k := 0; k < 20; k++ {
							if _, found, err := pollOnce(urlA, c.SID, id); err != nil || found {
								errs <- fmt.Errorf("task %s: found again (%v) after not found", id, err)
								return
							}
						}
						return
					}
				}
				errs <- fmt.Errorf("task %s still answered 10 s after its removal", id)
			}()
		}
		for i, id := range ids {
			time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
			removed[i].Store(true)
			if err := remove.Run(ctx, rdb, []string{keyOf(id)}, "tg:removed", id).Err(); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}
