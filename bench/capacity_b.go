package main

// Capacity phase B: the same operations for a 2025-11-25 client (one
// session, stateful upstream): create+finish and the two polls.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

type capB struct {
	life, pollDone, pollWork          capCount
	lifeCPU, pollDoneCPU, pollWorkCPU capCPU
}

func phaseB(ctx context.Context, o options, tg, tu, dir string) (*capB, error) {
	rs, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	e, err := startCapEnv(tg, tu, []*redisServer{rs}, "redis://"+rs.addr, false, 1, "--task", "echo", "--task", "slow", "--max-inflight", "20000")
	defer e.stop()
	if err != nil {
		return nil, err
	}
	url := e.urls[0]
	sid, err := initSession(ctx, e.c, url)
	if err != nil {
		return nil, err
	}
	hdr := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {"2025-11-25"}}
	create := func(ctx context.Context, tool string, args map[string]any) (string, error) {
		res, _, err := rpc(ctx, e.c, url, hdr, "tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 3600000}})
		if err != nil {
			return "", err
		}
		var ctr struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		}
		if json.Unmarshal(res, &ctr) != nil || ctr.Task.TaskID == "" {
			return "", fmt.Errorf("tools/call %s as task: %.300s", tool, res)
		}
		return ctr.Task.TaskID, nil
	}
	echo := map[string]any{"text": "hello"}
	b := &capB{}
	if _, err := parallel(ctx, 4, 20, 0, func(ctx context.Context, i int) error { _, err := create(ctx, "echo", echo); return err }); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := e.waitIdle(ctx); err != nil {
		return nil, err
	}
	n := max(100, o.countReqs/2)
	fmt.Fprintf(os.Stderr, "bench: capacity B (2025-11-25): create+finish, %d echo tasks\n", n)
	var ids []string
	if b.life, err = e.counted(ctx, func() (int, error) {
		for i := 0; i < n; i++ {
			id, err := create(ctx, "echo", echo)
			if err != nil {
				return i, err
			}
			ids = append(ids, id)
		}
		return n, e.waitIdle(ctx)
	}); err != nil {
		return nil, err
	}
	if b.lifeCPU, err = e.cpuBatch(func() (int, error) {
		n, err := parallel(ctx, o.concurrency, 0, capCPUBatch, func(ctx context.Context, i int) error { _, err := create(ctx, "echo", echo); return err })
		if err != nil {
			return n, err
		}
		return n, e.waitIdle(ctx)
	}); err != nil {
		return nil, err
	}
	held, err := create(ctx, "slow", map[string]any{"seconds": capHoldSecs, "text": "x"})
	if err != nil {
		return nil, err
	}
	pollReq := func(ids []string, want string) request {
		r := request{header: hdr, want: []byte(want)}
		for _, id := range ids {
			q, _ := json.Marshal(id)
			r.bodies = append(r.bodies, `{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":`+strings.ReplaceAll(string(q), "%", "%%")+`}}`)
		}
		return r
	}
	for _, p := range []struct {
		req request
		cnt *capCount
		cpu *capCPU
	}{{pollReq(ids[:min(o.tasks, len(ids))], `"completed"`), &b.pollDone, &b.pollDoneCPU}, {pollReq([]string{held}, `"working"`), &b.pollWork, &b.pollWorkCPU}} {
		if r := load(ctx, e.c, url, p.req, o.concurrency, 500*time.Millisecond, 0); r.requests == 0 || r.errors > 0 {
			return nil, fmt.Errorf("2025-11-25 poll warm-up: %d answers, %d errors: %s", r.requests, r.errors, firstErrText())
		}
		if *p.cnt, err = e.counted(ctx, func() (int, error) {
			r := load(ctx, e.c, url, p.req, 1, time.Minute, o.countReqs)
			return r.requests, errIf(r)
		}); err != nil {
			return nil, err
		}
		if *p.cpu, err = e.cpuBatch(func() (int, error) {
			r := load(ctx, e.c, url, p.req, o.concurrency, capCPUBatch, 0)
			return r.requests, errIf(r)
		}); err != nil {
			return nil, err
		}
	}
	return b, nil
}
