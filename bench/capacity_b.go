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

// capB is what phase B measured.
type capB struct {
	life, pollDone, pollWork          capCount
	lifeCPU, pollDoneCPU, pollWorkCPU capCPU
}

// phaseBRun is what phase B's steps share: one 2025-11-25 session.
type phaseBRun struct {
	ctx context.Context
	o   options
	e   *capEnv
	b   *capB
	url string
	hdr http.Header // the session's request headers
	ids []string    // the counted batch's tasks, completed
}

// phaseB runs phase B on processes of its own, stopped at its end.
func phaseB(ctx context.Context, o options, tg, tu, dir string) (*capB, error) {
	rs, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	e, err := startCapEnv(tg, tu, []*redisServer{rs}, "redis://"+rs.addr, false, 1, "--task", "echo", "--task", "slow", "--max-inflight", "20000", "--max-inflight-per-principal", "0", "--max-task-rate", "0")
	defer e.stop()
	if err != nil {
		return nil, err
	}
	p := &phaseBRun{ctx: ctx, o: o, e: e, b: &capB{}, url: e.urls[0]}
	sid, err := initSession(ctx, e.c, p.url)
	if err != nil {
		return nil, err
	}
	p.hdr = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {"2025-11-25"}}
	if err := p.lives(); err != nil {
		return nil, err
	}
	if err := p.polls(); err != nil {
		return nil, err
	}
	return p.b, nil
}

// create calls tool as a task on the session and returns the task's id.
func (p *phaseBRun) create(ctx context.Context, tool string, args map[string]any) (string, error) {
	res, _, err := rpc(ctx, p.e.c, p.url, p.hdr, "tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 3600000}})
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

func (p *phaseBRun) createEcho(ctx context.Context, i int) error {
	_, err := p.create(ctx, "echo", capEcho)
	return err
}

// lives counts create+finish one at a time, then times it at
// -concurrency.
func (p *phaseBRun) lives() error {
	ctx, e, b := p.ctx, p.e, p.b
	if _, err := parallel(ctx, 4, 20, 0, p.createEcho); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := e.waitIdle(ctx); err != nil {
		return err
	}
	n := max(100, p.o.countReqs/2)
	fmt.Fprintf(os.Stderr, "bench: capacity B (2025-11-25): create+finish, %d echo tasks\n", n)
	var err error
	if b.life, err = e.counted(ctx, func() (int, error) {
		for i := 0; i < n; i++ {
			id, err := p.create(ctx, "echo", capEcho)
			if err != nil {
				return i, err
			}
			p.ids = append(p.ids, id)
		}
		return n, e.waitIdle(ctx)
	}); err != nil {
		return err
	}
	b.lifeCPU, err = e.cpuBatch(func() (int, error) {
		n, err := parallel(ctx, p.o.concurrency, 0, capCPUBatch, p.createEcho)
		if err != nil {
			return n, err
		}
		return n, e.waitIdle(ctx)
	})
	return err
}

// pollReq is a load polling ids over the session.
func (p *phaseBRun) pollReq(ids []string, want string) request {
	r := request{header: p.hdr, want: []byte(want)}
	for _, id := range ids {
		q, _ := json.Marshal(id)
		r.bodies = append(r.bodies, `{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":`+strings.ReplaceAll(string(q), "%", "%%")+`}}`)
	}
	return r
}

// polls counts, then times, the polls of completed tasks and of one held
// task.
func (p *phaseBRun) polls() error {
	ctx, e, b, o := p.ctx, p.e, p.b, p.o
	held, err := p.create(ctx, "slow", capHeld)
	if err != nil {
		return err
	}
	for _, q := range []capPoll{
		{req: p.pollReq(p.ids[:min(o.tasks, len(p.ids))], `"completed"`), cnt: &b.pollDone, cpu: &b.pollDoneCPU},
		{req: p.pollReq([]string{held}, `"working"`), cnt: &b.pollWork, cpu: &b.pollWorkCPU},
	} {
		if r := load(ctx, e.c, p.url, q.req, o.concurrency, 500*time.Millisecond, 0); r.requests == 0 || r.errors > 0 {
			return fmt.Errorf("2025-11-25 poll warm-up: %d answers, %d errors: %s", r.requests, r.errors, firstErrText())
		}
		if *q.cnt, err = e.counted(ctx, func() (int, error) {
			r := load(ctx, e.c, p.url, q.req, 1, time.Minute, o.countReqs)
			return r.requests, errIf(r)
		}); err != nil {
			return err
		}
		if *q.cpu, err = e.cpuBatch(func() (int, error) {
			r := load(ctx, e.c, p.url, q.req, o.concurrency, capCPUBatch, 0)
			return r.requests, errIf(r)
		}); err != nil {
			return err
		}
	}
	return nil
}
