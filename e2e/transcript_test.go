package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

const passthroughGolden = "testdata/passthrough.golden.json"

// TestTranscript records the HTTP exchanges and JSON-RPC messages a go-sdk
// client sees, once directly against the upstream and once through the
// gateway. After normalizing session ids, the two must be identical to each
// other and to testdata/passthrough.golden.json (rewrite it with -update).
// This is what "a faithful MCP proxy" means on the wire.
func TestTranscript(t *testing.T) {
	golden := map[string]json.RawMessage{}
	if !*update {
		data, err := os.ReadFile(passthroughGolden)
		if err != nil {
			t.Fatalf("reading golden transcript (run with -update to create it): %v", err)
		}
		if err := json.Unmarshal(data, &golden); err != nil {
			t.Fatalf("parsing %s: %v", passthroughGolden, err)
		}
	}
	var (
		mu      sync.Mutex
		updated = map[string]json.RawMessage{}
	)
	t.Cleanup(func() { // after every parallel subtest
		if !*update || t.Failed() {
			return
		}
		data, err := json.MarshalIndent(updated, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(passthroughGolden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(passthroughGolden, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", passthroughGolden)
	})

	// Standalone SSE is off so every exchange happens in a deterministic
	// order; GET streams are covered by TestGoSDKClient and TestSessionDelete.
	for _, sc := range []scenario{statefulLegacy, statefulFallback, statelessModern} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			transcripts := map[string][]byte{}
			for _, via := range vias {
				t.Run(via, func(t *testing.T) {
					transcripts[via] = recordTranscript(t, endpoint(t, via, sc.upstream), sc.via(via))
				})
			}
			if sc.via("gateway").wantVersion != sc.wantVersion {
				// Through the gateway this client speaks another protocol
				// version than directly, by design: a different conversation,
				// exercised and checked above, but not comparable.
				delete(transcripts, "gateway")
			}
			direct, gateway := transcripts["direct"], transcripts["gateway"]
			if gateway != nil {
				// The gateway's one intended difference: a session that
				// negotiated 2025-11-25 is offered tasks.
				want := 0
				if sc.wantVersion == "2025-11-25" || sc.wantVersion >= "2026-07-28" {
					want = 1 // capabilities.tasks, or the tasks extension at discover
				}
				gateway = withoutTasksCapability(t, gateway, want)
			}
			if *update && direct != nil {
				mu.Lock()
				updated[sc.name] = direct
				mu.Unlock()
			}
			want := canonical(t, golden[sc.name])
			if *update {
				want = direct
			}
			if direct != nil && !*update && !bytes.Equal(direct, want) {
				t.Errorf("direct transcript differs from %s (the upstream changed? rerun with -update):\n%s",
					passthroughGolden, firstDifference(t, want, direct))
			}
			if gateway != nil && direct != nil && !bytes.Equal(gateway, direct) {
				t.Errorf("gateway transcript differs from direct:\n%s", firstDifference(t, direct, gateway))
			} else if gateway != nil && !bytes.Equal(gateway, want) {
				t.Errorf("gateway transcript differs from %s:\n%s", passthroughGolden, firstDifference(t, want, gateway))
			}
		})
	}
}

// recordTranscript runs a fixed session against url and returns its
// normalized transcript as canonical indented JSON.
func recordTranscript(t *testing.T, url string, sc scenario) []byte {
	t.Helper()
	rec := newWireRecorder()
	gc := connectGo(t, url, sc.version, rec.client(), false)
	exercise(t, gc, sc, 0.2)
	if err := gc.Close(); err != nil {
		t.Errorf("closing session: %v", err)
	}
	data, err := json.Marshal(normalize(rec.snapshot()))
	if err != nil {
		t.Fatal(err)
	}
	return canonical(t, data)
}

// canonical re-encodes JSON with sorted keys and indentation, so equal
// values compare equal as bytes and diffs read line by line.
func canonical(t *testing.T, data []byte) []byte {
	t.Helper()
	if len(data) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("canonical: %v", err)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// firstDifference names the first exchange where two transcripts differ and
// shows both versions of it.
func firstDifference(t *testing.T, want, got []byte) string {
	t.Helper()
	var w, g []json.RawMessage
	if err := json.Unmarshal(want, &w); err != nil {
		return fmt.Sprintf("want is not a transcript: %v", err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Sprintf("got is not a transcript: %v", err)
	}
	for i := 0; i < max(len(w), len(g)); i++ {
		var we, ge []byte
		if i < len(w) {
			we = canonical(t, w[i])
		}
		if i < len(g) {
			ge = canonical(t, g[i])
		}
		if !bytes.Equal(we, ge) {
			return fmt.Sprintf("exchange %d of %d (want) / %d (got):\n--- want\n%s\n--- got\n%s", i, len(w), len(g), orNone(we), orNone(ge))
		}
	}
	return "(no exchange differs; whitespace only?)"
}

func orNone(b []byte) string {
	if b == nil {
		return "(none)"
	}
	return string(b)
}
