package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// rawStep is one HTTP exchange of TestSessionDelete, reduced to what must be
// the same directly and through the gateway.
type rawStep struct {
	name        string
	status      int
	contentType string
	body        string // trimmed; only kept for error statuses
}

// TestSessionDelete pins session termination through the gateway: after
// DELETE, the session's standalone GET stream ends, and requests with the old
// Mcp-Session-Id get the upstream's 404 — the same answers as directly.
func TestSessionDelete(t *testing.T) {
	steps := map[string][]rawStep{}
	for _, via := range vias {
		t.Run(via, func(t *testing.T) {
			steps[via] = sessionLifecycle(t, endpoint(t, via, testupstream.Options{}))
		})
	}
	want := []struct {
		name   string
		status int
	}{
		{"initialize", 200}, {"notifications/initialized", 202}, {"GET stream", 200}, {"tools/call echo", 200},
		{"DELETE", 204}, {"tools/list after DELETE", 404}, {"GET after DELETE", 404}, {"DELETE after DELETE", 404},
	}
	for _, via := range vias {
		got := steps[via]
		if got == nil {
			continue
		}
		for i, w := range want {
			if i >= len(got) || got[i].name != w.name || got[i].status != w.status {
				t.Errorf("%s: step %d: got %+v, want %s → %d", via, i, at(got, i), w.name, w.status)
			}
		}
	}
	d, g := steps["direct"], steps["gateway"]
	if d != nil && g != nil {
		for i := range max(len(d), len(g)) {
			if at(d, i) != at(g, i) {
				t.Errorf("step %d differs through the gateway:\n  direct:  %+v\n  gateway: %+v", i, at(d, i), at(g, i))
			}
		}
	}
}

func at(s []rawStep, i int) rawStep {
	if i < len(s) {
		return s[i]
	}
	return rawStep{name: "(missing)"}
}

// sessionLifecycle opens a legacy session with plain HTTP, opens its GET
// stream, deletes the session and then uses the old id.
func sessionLifecycle(t *testing.T, url string) []rawStep {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var steps []rawStep
	do := func(name, method, sid, body string) (*http.Response, []byte) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, url, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: reading body: %v", name, err)
		}
		st := rawStep{name: name, status: resp.StatusCode, contentType: resp.Header.Get("Content-Type")}
		if resp.StatusCode >= 400 {
			st.body = strings.TrimSpace(string(data))
		}
		steps = append(steps, st)
		return resp, data
	}

	resp, _ := do("initialize", http.MethodPost, "",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: no Mcp-Session-Id (status %d)", resp.StatusCode)
	}
	do("notifications/initialized", http.MethodPost, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	// The standalone GET stream stays open until the session ends.
	getReq, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	getReq.Header.Set("Accept", "text/event-stream")
	getReq.Header.Set("Mcp-Session-Id", sid)
	getReq.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	getResp, err := http.DefaultClient.Do(getReq)
	if err != nil {
		t.Fatalf("GET stream: %v", err)
	}
	defer getResp.Body.Close()
	steps = append(steps, rawStep{name: "GET stream", status: getResp.StatusCode, contentType: getResp.Header.Get("Content-Type")})
	streamEnded := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, getResp.Body)
		streamEnded <- err
	}()

	_, body := do("tools/call echo", http.MethodPost, sid,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"before delete"}}}`)
	if !bytes.Contains(body, []byte(`"text":"before delete"`)) {
		t.Errorf("tools/call echo: body %q lacks the echoed text", body)
	}

	do("DELETE", http.MethodDelete, sid, "")
	select {
	case err := <-streamEnded:
		if err != nil {
			t.Errorf("GET stream ended with %v after DELETE, want a clean end", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("GET stream still open 5 s after DELETE")
	}

	do("tools/list after DELETE", http.MethodPost, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	do("GET after DELETE", http.MethodGet, sid, "")
	do("DELETE after DELETE", http.MethodDelete, sid, "")
	for _, s := range steps {
		t.Logf("%s", fmt.Sprintf("%-26s %d %-18s %s", s.name, s.status, s.contentType, s.body))
	}
	return steps
}
