package upstreamside

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/upstream"
)

// TestRelayCallSkipsInputRounds: a forwarded call whose answer asked the
// user for input teaches nothing; one that answered does.
func TestRelayCallSkipsInputRounds(t *testing.T) {
	up, err := upstream.New("http://127.0.0.1:1/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := decide.NewDecider(nil, nil, zerolog.Nop())
	u := New(up, nil, d, 0, zerolog.Nop())
	for _, tt := range []struct {
		name, ct, body string
		learned        int
	}{
		{"result", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, 1},
		{"sse result", "text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n", 1},
		{"elicitation", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"elicitation/create\",\"params\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n", 0},
		{"mrtr round", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{}}}`, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tool := "t-" + strings.ReplaceAll(tt.name, " ", "-")
			resp := upstreamResponse(tt.ct, tt.body)
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			u.relayAnswer(rec, req, resp, nil, tool, time.Now().Add(-time.Second))
			if rec.Body.String() != tt.body {
				t.Errorf("relayed %q", rec.Body.String())
			}
			if got := d.Latency(tool).Count; got != tt.learned {
				t.Errorf("learned %d observations, want %d", got, tt.learned)
			}
		})
	}
}

// TestLatencyObserveAllocationFree: what the sync forward adds to a call,
// noting the chunks relayed and recording the latency, allocates nothing.
func TestLatencyObserveAllocationFree(t *testing.T) {
	h := decide.NewDecider(nil, nil, zerolog.Nop())
	h.Observe("echo", time.Millisecond) // the tool's entry
	chunk := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n")
	allocs := testing.AllocsPerRun(100, func() {
		var seen relaySeen
		seen.Wrote(chunk)
		seen.Ended(io.EOF)
		if seen.Complete && seen.Answered && !seen.Input {
			h.Observe("echo", seen.End.Sub(seen.End.Add(-time.Millisecond)))
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per call", allocs)
	}
}
