package main

// -mode modern: the performance targets for 2026-07-28 clients, in one run,
// through taskgate on a real redis-server in front of a stateless
// (2026-07-28) go-sdk upstream:
//
//  1. a fast tool (echo) called "auto" (the client declares the tasks
//     extension, no rule matches: the gateway's hybrid path) against the
//     same call passed through (extension not declared) and sent directly
//     to the upstream: latency at c=1, throughput at -concurrency; target
//     auto ≤ 1.05× the pass-through latency, and no Redis write on the
//     auto path;
//  2. tasks/get on completed tasks (--task slow) against the pass-through
//     throughput of (1): target ≥ 1.5×;
//  3. tasks/update on a task in input_required (--task elicit: the
//     upstream's MRTR round becomes the task's inputRequests): ack latency
//     and Redis round trips per update: target one (1 EVALSHA).
//
// Redis commands are counted with the slow log at a 0 µs threshold
// (redis_count.go), on only while a counted batch runs.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

const (
	modernProto   = "2026-07-28"
	tasksExtID    = "io.modelcontextprotocol/tasks"
	modernAuth    = "Bearer taskgate-bench" // one owner for every request
	slowToolSecs  = 0.02                    // the --task slow tool the tasks/get load polls
	unknownUpdKey = "bench-not-outstanding"

	mAuto   = "tools/call echo: auto (extension declared, no rule)"
	mPass   = "tools/call echo: pass-through (extension not declared)"
	mDirect = "tools/call echo: upstream direct"
	mGet    = "tasks/get (completed task)"
	mUpdNop = "tasks/update ack (key not outstanding: no state change)"
	mUpdAns = "tasks/update ack (answers the elicitation)"
)

// modernCaps is the client capabilities object: identical with and without
// the extension but for the extension itself.
func modernCaps(ext bool) string {
	if ext {
		return `{"elicitation":{"form":{}},"extensions":{"` + tasksExtID + `":{}}}`
	}
	return `{"elicitation":{"form":{}}}`
}

func modernMetaJSON(ext bool) string {
	return `{"io.modelcontextprotocol/protocolVersion":"` + modernProto + `","io.modelcontextprotocol/clientCapabilities":` + modernCaps(ext) + `}`
}

// modernHeader is a 2026-07-28 request's headers: no session, the routing
// headers on every request.
func modernHeader(method, name string) http.Header {
	h := http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {modernProto},
		"Mcp-Method":           {method},
		"Authorization":        {modernAuth},
	}
	if name != "" {
		h["Mcp-Name"] = []string{name}
	}
	return h
}

// modernBody is a load body format (one %d, the id); members are params'
// members other than _meta, as JSON without the braces.
func modernBody(method, members string, ext bool) string {
	return `{"jsonrpc":"2.0","id":%d,"method":"` + method + `","params":{` +
		strings.ReplaceAll(members, "%", "%%") + `,"_meta":` + modernMetaJSON(ext) + `}}`
}

// modernCall sends one modern request as the bench's one owner
// (modernAuth) and returns its result.
func modernCall(ctx context.Context, c *http.Client, url, method, name string, ext bool, params map[string]any) (json.RawMessage, string, error) {
	return modernCallAs(ctx, c, url, method, name, modernAuth, ext, params)
}

// modernCallAs is modernCall with another Authorization: another owner.
func modernCallAs(ctx context.Context, c *http.Client, url, method, name, auth string, ext bool, params map[string]any) (json.RawMessage, string, error) {
	p := map[string]any{"_meta": json.RawMessage(modernMetaJSON(ext))}
	for k, v := range params {
		p[k] = v
	}
	h := modernHeader(method, name)
	h.Set("Authorization", auth)
	return rpc(ctx, c, url, h, method, p)
}

// createdTask is the id of the task a tools/call of tool answered with
// (a CreateTaskResult).
func createdTask(tool string, res json.RawMessage) (string, error) {
	var t mtask
	if json.Unmarshal(res, &t) != nil || t.ResultType != "task" || t.TaskID == "" {
		return "", fmt.Errorf("tools/call %s: want a CreateTaskResult, got %.300s", tool, res)
	}
	return t.TaskID, nil
}

// gotTask is the task a tasks/get answered with.
func gotTask(res json.RawMessage) (mtask, error) {
	var t mtask
	if err := json.Unmarshal(res, &t); err != nil {
		return mtask{}, fmt.Errorf("tasks/get: %w: %.300s", err, res)
	}
	return t, nil
}

// mtask is the part of a (Detailed)Task the bench looks at.
type mtask struct {
	ResultType    string          `json:"resultType"`
	TaskID        string          `json:"taskId"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage"`
	Result        json.RawMessage `json:"result"`
	InputRequests map[string]struct {
		Method string `json:"method"`
	} `json:"inputRequests"`
}

type modernRun struct {
	o     options
	c     *http.Client
	tgURL string
	upURL string
	rc    *redisCounter
}

// toolTask calls tool as a task (a --task rule matches it) and returns its id.
func (m *modernRun) toolTask(ctx context.Context, tool string, args map[string]any) (string, error) {
	res, _, err := modernCall(ctx, m.c, m.tgURL, "tools/call", tool, true, map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return "", err
	}
	return createdTask(tool, res)
}

// getTask is one tasks/get.
func (m *modernRun) getTask(ctx context.Context, id string) (mtask, error) {
	res, _, err := modernCall(ctx, m.c, m.tgURL, "tasks/get", id, true, map[string]any{"taskId": id})
	if err != nil {
		return mtask{}, err
	}
	return gotTask(res)
}

// waitStatus polls tasks/get until the task has status (at most 15 s).
func (m *modernRun) waitStatus(ctx context.Context, id, status string) (mtask, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		t, err := m.getTask(ctx, id)
		switch {
		case err != nil:
			return t, err
		case t.Status == status:
			return t, nil
		case t.Status != "working" && t.Status != "input_required":
			return t, fmt.Errorf("task %s is %s (%s), want %s", id, t.Status, t.StatusMessage, status)
		case time.Now().After(deadline):
			return t, fmt.Errorf("task %s still %s after 15s, want %s", id, t.Status, status)
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// elicitWaiting starts an elicit task and waits until it is input_required;
// it returns the task's id and the key of its one input request.
func (m *modernRun) elicitWaiting(ctx context.Context) (string, string, error) {
	id, err := m.toolTask(ctx, "elicit", map[string]any{})
	if err != nil {
		return "", "", err
	}
	t, err := m.waitStatus(ctx, id, "input_required")
	if err != nil {
		return "", "", err
	}
	if len(t.InputRequests) != 1 {
		return "", "", fmt.Errorf("elicit task %s: want 1 input request, got %d", id, len(t.InputRequests))
	}
	for k, in := range t.InputRequests {
		if in.Method != "elicitation/create" {
			return "", "", fmt.Errorf("elicit task %s: input request %s is %s", id, k, in.Method)
		}
		return id, k, nil
	}
	panic("unreachable")
}

// answer sends the tasks/update that answers key with name and returns its
// ack latency.
func (m *modernRun) answer(ctx context.Context, id, key, name string) (time.Duration, error) {
	t0 := time.Now()
	res, _, err := modernCall(ctx, m.c, m.tgURL, "tasks/update", id, true, map[string]any{
		"taskId": id, "inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"name": name}}},
	})
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if !strings.Contains(string(res), `"resultType":"complete"`) {
		return 0, fmt.Errorf("tasks/update ack: %.300s", res)
	}
	return d, nil
}

// answered waits until the answered task completes with the greeting.
func (m *modernRun) answered(ctx context.Context, id, name string) error {
	t, err := m.waitStatus(ctx, id, "completed")
	if err != nil {
		return err
	}
	if !strings.Contains(string(t.Result), "Hello, "+name+"!") {
		return fmt.Errorf("answered task %s: result %.300s", id, t.Result)
	}
	return nil
}

var answerSeq int

// answerSamples measures n tasks/update acks, each on a fresh elicit task
// that has reached input_required, and lets each task complete before the
// next (no background work overlaps a sample).
func (m *modernRun) answerSamples(ctx context.Context, n int) (result, error) {
	var r result
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		id, key, err := m.elicitWaiting(ctx)
		if err != nil {
			return r, err
		}
		answerSeq++
		name := fmt.Sprint("bench-", answerSeq)
		d, err := m.answer(ctx, id, key, name)
		if err != nil {
			return r, err
		}
		if err := m.answered(ctx, id, name); err != nil {
			return r, err
		}
		r.requests++
		r.lat = append(r.lat, d)
	}
	r.elapsed = time.Since(start)
	return r, nil
}
