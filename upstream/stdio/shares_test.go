package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/upstream"
)

// refusals records what a bridge told the gateway it refused.
type refusals struct {
	mu      sync.Mutex
	reasons []string
}

func (r *refusals) add(reason, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reasons...)
}

// initializeAs sends an initialize for principal key (as the gateway sets
// it on the request's context); it returns the session id, or the
// refusal's message, reason and retryAfterMs.
func initializeAs(t *testing.T, b *Bridge, key string, heard *refusals) (sid, message, reason string, retryMs int64) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	ctx := upstream.WithPrincipal(context.Background(), upstream.Principal{Key: key, Refused: heard.add})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: b.Transport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Error *struct {
			Message string `json:"message"`
			Data    struct {
				Reason       string `json:"reason"`
				RetryAfterMs int64  `json:"retryAfterMs"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Error != nil {
		return "", m.Error.Message, m.Error.Data.Reason, m.Error.Data.RetryAfterMs
	}
	return resp.Header.Get("Mcp-Session-Id"), "", "", 0
}

func deleteSession(t *testing.T, b *Bridge, sid string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, URL, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := (&http.Client{Transport: b.Transport()}).Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestBridgeSessionShare: one principal cannot take every session of the
// stdio server (issue 36: with --max-sessions 5, Mallory's five sessions
// locked Bob out for up to --session-idle). Past its share (half of
// --max-sessions by default) its initialize is refused naming the flag,
// with a retry hint, and the gateway hears of it; another principal still
// opens one; a session ending frees its share.
func TestBridgeSessionShare(t *testing.T) {
	heard := &refusals{}
	b, _ := startBridge(t, func(o *Options) { o.MaxSessions = 5; o.SessionIdle = time.Hour })
	var mallory []string
	for range 5 {
		if sid, msg, _, _ := initializeAs(t, b, "mallory", heard); sid != "" {
			mallory = append(mallory, sid)
		} else if !strings.Contains(msg, "--max-sessions-per-principal") {
			t.Fatalf("Mallory's refusal %q does not name the flag", msg)
		}
	}
	if sid, msg, _, _ := initializeAs(t, b, "bob", heard); sid == "" {
		t.Fatalf("Bob refused for Mallory's sessions: %s", msg)
	}
	if len(mallory) != 2 {
		t.Fatalf("Mallory opened %d sessions, want 2 (half of 5)", len(mallory))
	}
	_, _, reason, retry := initializeAs(t, b, "mallory", heard)
	if reason != "max_sessions_per_principal" || retry < 1000 || retry > time.Hour.Milliseconds() {
		t.Fatalf("refusal reason %q retryAfterMs %d, want max_sessions_per_principal and up to --session-idle", reason, retry)
	}
	if got := heard.list(); len(got) != 4 || got[0] != "max_sessions_per_principal" {
		t.Fatalf("refusals heard: %v, want 4 max_sessions_per_principal", got)
	}
	deleteSession(t, b, mallory[0])
	if sid, msg, _, _ := initializeAs(t, b, "mallory", heard); sid == "" {
		t.Fatalf("after a DELETE Mallory is still refused: %s", msg)
	}
}

// TestBridgeSessionShareFreedByIdle: an idle session reaped frees its
// principal's share; requests with no principal count for nobody but
// still against --max-sessions.
func TestBridgeSessionShareFreedByIdle(t *testing.T) {
	heard := &refusals{}
	b, _ := startBridge(t, func(o *Options) { o.MaxSessions = 2; o.SessionIdle = 200 * time.Millisecond })
	if sid, msg, _, _ := initializeAs(t, b, "mallory", heard); sid == "" {
		t.Fatal(msg)
	}
	if sid, _, reason, _ := initializeAs(t, b, "mallory", heard); sid != "" || reason != "max_sessions_per_principal" {
		t.Fatalf("Mallory's second session: %q %q, want refused", sid, reason)
	}
	deadline := time.Now().Add(10 * time.Second)
	for { // reaped after --session-idle
		sid, _, _, _ := initializeAs(t, b, "mallory", heard)
		if sid != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Mallory's idle session was never reaped: her share stays taken")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sid, msg, _, _ := initializeAs(t, b, "", heard); sid == "" {
		t.Fatalf("a session without principal: %s", msg)
	}
	if _, _, reason, _ := initializeAs(t, b, "", heard); reason != "max_sessions" {
		t.Fatalf("a third session: reason %q, want max_sessions", reason)
	}
}
