package front2026

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// TestListenIsBounded: one client holds at most maxListensPerSubscriber
// subscriptions/listen streams on a replica, and a finished task on a
// stream is never read again (streams used to re-read every task, finished
// or not, on every resync, and any number of them).
func TestListenIsBounded(t *testing.T) {
	cmds := gwtest.NewCommandCounter()
	rig := newStoreRig(t, true, taskstore.Options{ResyncInterval: 20 * time.Millisecond},
		frontrig.Config{Policy: gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task))}, cmds)
	c := rig.c
	c.Auth = "Bearer listener"
	done := c.ToolTask("slow", map[string]any{"seconds": 0.01})
	c.WaitTask(done.TaskID, "completed")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The worker that stored the outcome reads the task once more as it
	// ends (the status notification); only after it is gone may every
	// read of the task be blamed on the stream.
	idleCtx, idleDone := context.WithTimeout(ctx, 30*time.Second)
	defer idleDone()
	if err := rig.r.Deps.Runner.Idle(idleCtx); err != nil {
		t.Fatalf("the task's worker did not end: %v", err)
	}
	listen := func(ids ...string) *http.Response {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":"s","method":"subscriptions/listen","params":{"notifications":{"taskIds":%s},`+
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`,
			mustJSONList(ids))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URLs[0], strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		req.Header.Set("Authorization", c.Auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := listen(done.TaskID)
	defer first.Body.Close()
	ack := bufio.NewReader(first.Body)
	if line, _ := ack.ReadString('\n'); !strings.Contains(line, "event") && !strings.Contains(line, "data") {
		t.Fatalf("no acknowledgement: %q", line)
	}
	cmds.Reset()
	time.Sleep(200 * time.Millisecond) // ten resync periods
	if n := cmds.Reset()["hgetall"]; n != 0 {
		t.Errorf("a stream re-read its finished task %d times", n)
	}
	var open []*http.Response
	for range maxListensPerSubscriber - 1 {
		r := listen()
		if r.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: HTTP %d", len(open)+2, r.StatusCode)
		}
		open = append(open, r)
	}
	over := listen()
	body, _ := io.ReadAll(over.Body)
	over.Body.Close()
	if over.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "too many subscriptions/listen streams") {
		t.Errorf("stream %d: HTTP %d %s, want 429", maxListensPerSubscriber+1, over.StatusCode, body)
	}
	for _, r := range open {
		r.Body.Close()
	}
}

func mustJSONList(ids []string) string {
	if ids == nil {
		ids = []string{}
	}
	return string(mcpwire.MustMarshal(ids))
}

// storeRig is one replica's Front on a miniredis store
// (frontrig.MiniStore: its client with the given hooks, go-redis's own
// retries off) in front of a test upstream (the Handler tests'
// newStoreRig).
type storeRig struct {
	r *frontrig.Replica
	c *gwtest.ModernClient
}

func newStoreRig(t *testing.T, stateless bool, so taskstore.Options, cfg frontrig.Config, hooks ...redis.Hook) *storeRig {
	t.Helper()
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: stateless}))
	t.Cleanup(up.Close)
	store := frontrig.MiniStore(t, miniredis.RunT(t), so, hooks...)
	client, err := upstream.New(up.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstream, cfg.Store, cfg.PollLimit = client, store, -1
	rig := &storeRig{r: frontrig.New(t, cfg)}
	srv := httptest.NewServer(serveFront(rig.r))
	t.Cleanup(srv.Close)
	rig.c = &gwtest.ModernClient{T: t, URLs: []string{srv.URL + "/mcp"}}
	return rig
}
