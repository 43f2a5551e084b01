package front2025

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// openStream opens the GET stream of session sid on url and returns its
// messages; the channel closes when the stream ends.
func openStream(t *testing.T, ctx context.Context, url, sid, auth string) <-chan gwtest.Reply {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET: HTTP %d", resp.StatusCode)
	}
	out := make(chan gwtest.Reply, 64)
	go func() {
		defer close(out)
		_ = gwtest.ScanMessages(resp, func(m gwtest.Reply) bool {
			select {
			case out <- m:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	return out
}

// awaitNote reads stream until a message matching want, failing the test
// after 10 s or when the stream ends.
func awaitNote(t *testing.T, stream <-chan gwtest.Reply, what string, want func(gwtest.Reply) bool) gwtest.Reply {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-stream:
			if !ok {
				t.Fatalf("the GET stream ended before %s", what)
			}
			if want(m) {
				return m
			}
		case <-timeout:
			t.Fatalf("no %s on the GET stream", what)
		}
	}
}

// TestStatelessUpstreamSessionNotify: what a 2025-11-25 client does to its
// session after initialize works in front of a stateless upstream, on any
// replica: resources/subscribe puts the resource in the upstream listen
// filter (its updates reach the GET stream held by another replica),
// logging/setLevel becomes the per-request log level (messages at or above
// it reach a plain call's stream, and a task's reach the GET stream),
// notifications/cancelled cancels a plain call upstream, and DELETE ends
// the GET stream another replica holds.
func TestStatelessUpstreamSessionNotify(t *testing.T) {
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true, Notify: true, Recorder: rec}))
	t.Cleanup(up.Close)
	fl := newFleet(t, up.URL+"/mcp")
	pol := func(c *frontrig.Config) { c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "log", policy.Task)) }
	fl.Add(pol)
	fl.Add(pol)
	a := &gwtest.Client{T: t, URLs: fl.URLs[:1], Auth: "Bearer alice"}
	init := a.InitializeAs("2025-11-25", map[string]any{})
	var caps struct {
		Capabilities struct {
			Logging   json.RawMessage `json:"logging"`
			Resources struct {
				Subscribe bool `json:"subscribe"`
			} `json:"resources"`
			Tasks json.RawMessage `json:"tasks"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(init, &caps); err != nil || caps.Capabilities.Logging == nil || !caps.Capabilities.Resources.Subscribe || caps.Capabilities.Tasks == nil {
		t.Fatalf("initialize: %s; want logging, resources.subscribe and tasks", init)
	}
	b := &gwtest.Client{T: t, URLs: fl.URLs[1:], SID: a.SID, Auth: a.Auth} // the same session on the other replica
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream := openStream(t, ctx, fl.URLs[1], a.SID, a.Auth)

	// Subscribed through replica 0; the update reaches replica 1's stream
	// once it has listened again with the new filter (retried: the touch
	// may come first).
	if r := a.Call("resources/subscribe", map[string]any{"uri": testupstream.NoteURI}); r.Error != nil || string(r.Result) != "{}" {
		t.Fatalf("resources/subscribe: %+v %s", r.Error, r.Result)
	}
	got := make(chan gwtest.Reply, 1)
	go func() {
		for m := range stream {
			if m.Method == "notifications/resources/updated" {
				got <- m
				return
			}
		}
	}()
	var update gwtest.Reply
	gwtest.WaitFor(t, func() bool {
		if text, _, _ := gwtest.ResultText(t, a.Call("tools/call", map[string]any{"name": "touch", "arguments": map[string]any{}}).Result); text != "touched" {
			t.Fatalf("touch: %q", text)
		}
		select {
		case update = <-got:
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	})
	if !strings.Contains(string(update.Params), testupstream.NoteURI) || strings.Contains(string(update.Params), "subscriptionId") {
		t.Errorf("resources/updated params %s: want the uri, without the 2026-07-28 subscription _meta", update.Params)
	}

	// No level set: the upstream sends no log message.
	if msgs := a.CallAll("tools/call", map[string]any{"name": "log", "arguments": map[string]any{"text": "quiet"}}); countMethod(msgs, "notifications/message") != 0 {
		t.Errorf("log messages before any logging/setLevel: %+v", msgs)
	}
	if r := b.Call("logging/setLevel", map[string]any{"level": "loud"}); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("logging/setLevel loud: %+v, want -32602", r.Error)
	}
	if r := b.Call("logging/setLevel", map[string]any{"level": "info"}); r.Error != nil {
		t.Fatalf("logging/setLevel: %+v", r.Error)
	}
	msgs := a.CallAll("tools/call", map[string]any{"name": "log", "arguments": map[string]any{"text": "plain"}})
	var levels []string
	for _, m := range msgs {
		if m.Method == "notifications/message" {
			var p struct {
				Level string `json:"level"`
			}
			_ = json.Unmarshal(m.Params, &p)
			levels = append(levels, p.Level)
		}
	}
	if strings.Join(levels, ",") != "info,error" || msgs[len(msgs)-1].Result == nil {
		t.Errorf("a plain call at level info: messages %v (want info,error before the result), last %+v", levels, msgs[len(msgs)-1])
	}
	// A task's log messages go to the GET stream, tied to the task.
	task := a.StartTask("log", map[string]any{"text": "tasked"}, nil)
	m := awaitNote(t, stream, "the task's log message", func(m gwtest.Reply) bool {
		return m.Method == "notifications/message" && strings.Contains(string(m.Params), "tasked")
	})
	if !strings.Contains(string(m.Params), task.TaskID) {
		t.Errorf("the task's log message %s does not name the task", m.Params)
	}
	a.WaitStatus(task.TaskID, "completed")

	// notifications/cancelled, sent through the other replica, cancels a
	// plain call upstream.
	done := make(chan []gwtest.Reply, 1)
	go func() {
		resp := a.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": "long-1", "method": "tools/call",
			"params": map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 30}}})
		var out []gwtest.Reply
		_ = gwtest.ScanMessages(resp, func(m gwtest.Reply) bool { out = append(out, m); return true })
		done <- out
	}()
	gwtest.WaitFor(t, func() bool { return rec.Count("slow", testupstream.Called) == 1 })
	r := b.Do(ctx, map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": "long-1", "reason": "changed my mind"}})
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Errorf("notifications/cancelled: HTTP %d", r.StatusCode)
	}
	gwtest.WaitFor(t, func() bool { return rec.Count("slow", testupstream.Cancelled) == 1 })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("the cancelled call's stream did not end")
	}

	// DELETE through replica 0 ends replica 1's GET stream.
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, fl.URLs[0], nil)
	req.Header.Set("Mcp-Session-Id", a.SID)
	req.Header.Set("Authorization", a.Auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ended := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-stream:
		case <-ended:
			t.Fatal("the other replica's GET stream outlived the DELETE")
		}
	}
}

func countMethod(msgs []gwtest.Reply, method string) int {
	n := 0
	for _, m := range msgs {
		if m.Method == method {
			n++
		}
	}
	return n
}
