package upstreamside

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// brokenStreamUpstream answers every POST with an SSE stream holding one
// progress notification; then, with clean, ends the stream properly, else
// drops the connection mid-stream as a crashing server does.
func brokenStreamUpstream(t *testing.T, clean, cutMidEvent bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n"))
		if cutMidEvent {
			_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\""))
		}
		w.(http.Flusher).Flush()
		if clean {
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // no terminating chunk: the gateway reads an unexpected EOF
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// sseData returns the data lines of an SSE body.
func sseData(t *testing.T, resp *http.Response) []string {
	t.Helper()
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestBrokenUpstreamStreamAnswersTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name              string
		clean, cut        bool
		wantError, wantID bool
	}{
		{"connection dropped after an event", false, false, true, true},
		{"connection dropped mid-event", false, true, true, true},
		{"clean end of stream (resumable server)", true, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := brokenStreamUpstream(t, tc.clean, tc.cut)
			gw := relayOnly(t, up.URL, 0)

			req, _ := http.NewRequest(http.MethodPost, gw, strings.NewReader(
				`{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"x","_meta":{"progressToken":1}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data := sseData(t, resp)
			if len(data) == 0 || !strings.Contains(data[0], "notifications/progress") {
				t.Fatalf("events = %q, want the upstream's progress first", data)
			}
			last := data[len(data)-1]
			gotError := strings.Contains(last, `"error"`) && strings.Contains(last, `"id":"call-7"`) &&
				strings.Contains(last, `"code":-32603`) && strings.Contains(last, "the upstream broke off") && !strings.Contains(last, up.URL)
			if gotError != tc.wantError {
				t.Errorf("last event %s: error answer = %v, want %v", last, gotError, tc.wantError)
			}
		})
	}
}
