package main

// The capacity mode's environment: one phase's processes (an upstream,
// taskgate replicas, the Redis nodes they use) and the requests the phases
// send them, on behalf of many owners and at a chosen concurrency.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
)

// capEnv is one phase's processes: an upstream, taskgate replicas, and the
// Redis node(s) they use.
type capEnv struct {
	c       *http.Client
	up      string   // upstream URL
	urls    []string // taskgate replicas
	metrics []string // their metrics URLs
	tgPIDs  []int
	nodes   []*redisServer
	rcs     []*redisCounter // one per node (the bench's own connection, not counted)
	ps      procs
	prefix  sync.Map // Authorization → its owner's key prefix (the bench's status reads)
}

// stop stops the phase's processes, each by its PID.
func (e *capEnv) stop() {
	// taskgate first and by SIGKILL: a graceful stop fails (and logs) every
	// held task; then the upstream, then Redis.
	for _, pid := range e.tgPIDs {
		for _, c := range e.ps {
			if c.Process.Pid == pid {
				_ = c.Process.Kill()
			}
		}
	}
	e.ps.stopAll()
	for _, rc := range e.rcs {
		rc.close()
	}
	for _, n := range e.nodes {
		n.stop()
	}
}

// startCapEnv starts an upstream (stateless or not) and n taskgate
// replicas on the given Redis nodes; redisURL is what taskgate gets.
func startCapEnv(tg, tu string, nodes []*redisServer, redisURL string, stateless bool, n int, extra ...string) (*capEnv, error) {
	e := &capEnv{c: newClient(64), nodes: nodes}
	for _, nd := range nodes {
		e.rcs = append(e.rcs, newRedisCounter(nd.addr))
	}
	upAddr, _ := freeAddr()
	upArgs := []string{"--listen", upAddr}
	if stateless {
		upArgs = append(upArgs, "--stateless")
	}
	if err := e.ps.start(tu, upArgs...); err != nil {
		return e, err
	}
	e.up = "http://" + upAddr + "/mcp"
	addrs := []string{upAddr}
	for i := 0; i < n; i++ {
		a, _ := freeAddr()
		m, _ := freeAddr()
		args := append([]string{"serve", "--listen", a, "--upstream", e.up, "--redis-url", redisURL,
			"--metrics-listen", m, "--replica-id", fmt.Sprintf("capacity-%d-%d", os.Getpid(), i+1),
			"--max-tasks-per-owner", "-1", "--log-level", "error", "--drain-timeout", "1s", "--shutdown-timeout", "1s"},
			extra...)
		args = append(args, pollArgs(tg)...)
		if err := e.ps.start(tg, args...); err != nil {
			return e, err
		}
		e.tgPIDs = append(e.tgPIDs, e.ps[len(e.ps)-1].Process.Pid)
		e.urls = append(e.urls, "http://"+a+"/mcp")
		e.metrics = append(e.metrics, "http://"+m+"/metrics")
		addrs = append(addrs, a, m)
	}
	for _, a := range addrs {
		if err := waitTCP(a); err != nil {
			return e, err
		}
	}
	return e, nil
}

// capAuth is the Authorization of owner k of a group of owners.
func capAuth(group string, k int) string {
	return fmt.Sprintf("Bearer capacity-%s-%d", group, k)
}

// call2026 sends one 2026-07-28 request with the given Authorization.
func (e *capEnv) call2026(ctx context.Context, url, method, name, auth string, params map[string]any) (json.RawMessage, error) {
	res, _, err := modernCallAs(ctx, e.c, url, method, name, auth, true, params)
	return res, err
}

// create2026 calls tool as a task and returns its id.
func (e *capEnv) create2026(ctx context.Context, url, tool, auth string, args map[string]any) (string, error) {
	res, err := e.call2026(ctx, url, "tools/call", tool, auth, map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return "", err
	}
	return createdTask(tool, res)
}

// get2026 is one tasks/get.
func (e *capEnv) get2026(ctx context.Context, url, id, auth string) (mtask, error) {
	res, err := e.call2026(ctx, url, "tasks/get", id, auth, map[string]any{"taskId": id})
	if err != nil {
		return mtask{}, err
	}
	return gotTask(res)
}

// pollLoad is a load request polling ids (client i polls ids[i%len]).
func pollLoad(ids []string, auth, want string) request {
	r := request{want: []byte(want)}
	for _, id := range ids {
		q, _ := json.Marshal(id)
		r.bodies = append(r.bodies, modernBody("tasks/get", `"taskId":`+string(q), true))
		h := modernHeader("tasks/get", id)
		h.Set("Authorization", auth)
		r.headers = append(r.headers, h)
	}
	return r
}
