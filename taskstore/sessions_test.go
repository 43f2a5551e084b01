package taskstore

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

func TestSessions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		key := s.k.session("sess-{1}")
		if want := "tg:session:" + ownerTag("sess-{1}"); key != want {
			t.Fatalf("key = %q, want %q", key, want)
		}
		_, err := s.GetSession(ctx, "sess-{1}")
		wantErr(t, err, ErrNoSession)

		in := Session{ID: "sess-{1}", ClientVersion: "2025-11-25", UpstreamVersion: "2025-06-18",
			ClientCapabilities: json.RawMessage(`{"elicitation":{"form":{}}}`)}
		wantErr(t, s.PutSession(ctx, in, 24*time.Hour), nil)

		// Raw state.
		want := map[string]string{"id": "sess-{1}", "cv": "2025-11-25", "uv": "2025-06-18",
			"caps": `{"elicitation":{"form":{}}}`, "created": strconv.FormatInt(e.clock.Now().UnixMilli(), 10)}
		h := e.hash(key)
		for f, v := range want {
			if h[f] != v {
				t.Errorf("field %s = %q, want %q", f, h[f], v)
			}
		}
		if len(h) != len(want) {
			t.Errorf("hash has %d fields, want %d: %v", len(h), len(want), h)
		}
		if pttl := e.rdb.PTTL(ctx, key).Val(); pttl <= 23*time.Hour || pttl > 24*time.Hour {
			t.Errorf("PTTL = %v, want about 24h", pttl)
		}

		got, err := s.GetSession(ctx, "sess-{1}")
		wantErr(t, err, nil)
		if got.ID != in.ID || got.ClientVersion != in.ClientVersion || got.UpstreamVersion != in.UpstreamVersion ||
			string(got.ClientCapabilities) != string(in.ClientCapabilities) || !got.CreatedAt.Equal(e.clock.Now()) {
			t.Errorf("GetSession = %+v, want %+v", got, in)
		}

		// Touch renews; a missing record is not created.
		e.rdb.PExpire(ctx, key, time.Minute)
		ok, err := s.TouchSession(ctx, "sess-{1}", 24*time.Hour)
		if err != nil || !ok {
			t.Fatalf("TouchSession = %v, %v", ok, err)
		}
		if pttl := e.rdb.PTTL(ctx, key).Val(); pttl <= 23*time.Hour {
			t.Errorf("PTTL after touch = %v", pttl)
		}
		ok, err = s.TouchSession(ctx, "nope", time.Hour)
		if err != nil || ok || e.exists(s.k.session("nope")) {
			t.Errorf("TouchSession(missing) = %v, %v", ok, err)
		}

		// Expiry and deletion.
		wantErr(t, s.PutSession(ctx, Session{ID: "short", ClientVersion: "2025-11-25", UpstreamVersion: "2025-11-25"}, time.Second), nil)
		e.elapse(1100 * time.Millisecond)
		_, err = s.GetSession(ctx, "short")
		wantErr(t, err, ErrNoSession)

		wantErr(t, s.DeleteSession(ctx, "sess-{1}"), nil)
		_, err = s.GetSession(ctx, "sess-{1}")
		wantErr(t, err, ErrNoSession)
		wantErr(t, s.DeleteSession(ctx, "sess-{1}"), nil)
	})
}

func TestToolCatalogue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		if _, ok, err := s.Tool(ctx, "slow"); ok || err != nil {
			t.Fatalf("empty catalogue: ok=%v err=%v", ok, err)
		}
		wantErr(t, s.SetTools(ctx, map[string]ToolInfo{"slow": {TaskSupport: "optional"}, "echo": {}}), nil)
		wantErr(t, s.SetTools(ctx, map[string]ToolInfo{"slow": {TaskSupport: "required"}}), nil)
		wantErr(t, s.SetTools(ctx, nil), nil)
		if h := e.hash("tg:tools"); len(h) != 2 || h["slow"] != "required" || h["echo"] != "" {
			t.Errorf("raw catalogue = %v", h)
		}
		for tool, want := range map[string]string{"slow": "required", "echo": ""} {
			if got, ok, err := s.Tool(ctx, tool); got.TaskSupport != want || !ok || err != nil {
				t.Errorf("Tool(%s).TaskSupport = %q, %v, %v", tool, got.TaskSupport, ok, err)
			}
		}

		// Annotations ride along; a tool without them keeps the bare form.
		ann := json.RawMessage(`{"readOnlyHint":true}`)
		wantErr(t, s.SetTools(ctx, map[string]ToolInfo{"read": {TaskSupport: "optional", Annotations: ann}, "plain": {}}), nil)
		if h := e.hash("tg:tools"); h["read"] != `{"taskSupport":"optional","annotations":{"readOnlyHint":true}}` || h["plain"] != "" {
			t.Errorf("raw catalogue = %v", h)
		}
		if got, ok, err := s.Tool(ctx, "read"); !ok || err != nil || got.TaskSupport != "optional" || string(got.Annotations) != string(ann) {
			t.Errorf("Tool(read) = %+v, %v, %v", got, ok, err)
		}
		if got, ok, err := s.Tool(ctx, "read"); got.TaskSupport != "optional" || !ok || err != nil {
			t.Errorf("Tool(read).TaskSupport = %q, %v, %v", got.TaskSupport, ok, err)
		}
		if got, ok, err := s.Tool(ctx, "slow"); !ok || err != nil || got.TaskSupport != "required" || got.Annotations != nil {
			t.Errorf("Tool(slow) = %+v, %v, %v", got, ok, err)
		}
	})
}

func TestSessionsUnavailable(t *testing.T) {
	e := openMiniredis(t)
	s := e.store(t)
	e.mini.Close()
	wantErr(t, s.PutSession(ctx, Session{ID: "x", ClientVersion: "2025-11-25"}, time.Hour), ErrUnavailable)
	_, err := s.GetSession(ctx, "x")
	wantErr(t, err, ErrUnavailable)
	_, err = s.TouchSession(ctx, "x", time.Hour)
	wantErr(t, err, ErrUnavailable)
	wantErr(t, s.DeleteSession(ctx, "x"), ErrUnavailable)
	wantErr(t, s.SetTools(ctx, map[string]ToolInfo{"a": {}}), ErrUnavailable)
	_, _, err = s.Tool(ctx, "a")
	wantErr(t, err, ErrUnavailable)
}

// TestMarkSessionFallback: the mark is set once, read back by GetSession,
// never creates a record, and is gone with the record.
func TestMarkSessionFallback(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		_, err := s.MarkSessionFallback(ctx, "nobody")
		wantErr(t, err, ErrNoSession)
		if n := e.rdb.Exists(ctx, s.k.session("nobody")).Val(); n != 0 {
			t.Fatalf("marking a missing session created a key")
		}
		wantErr(t, s.PutSession(ctx, Session{ID: "s1", ClientVersion: "2025-06-18", UpstreamVersion: "2025-06-18"}, time.Hour), nil)
		if got, _ := s.GetSession(ctx, "s1"); got == nil || got.Fallback {
			t.Fatalf("new session = %+v, want one without the mark", got)
		}
		first, err := s.MarkSessionFallback(ctx, "s1")
		if err != nil || !first {
			t.Fatalf("first mark = %v, %v; want true", first, err)
		}
		if again, err := s.MarkSessionFallback(ctx, "s1"); err != nil || again {
			t.Fatalf("second mark = %v, %v; want false", again, err)
		}
		if got, _ := s.GetSession(ctx, "s1"); got == nil || !got.Fallback {
			t.Fatalf("marked session = %+v, want Fallback", got)
		}
		wantErr(t, s.DeleteSession(ctx, "s1"), nil)
		_, err = s.MarkSessionFallback(ctx, "s1")
		wantErr(t, err, ErrNoSession)
	})
}
