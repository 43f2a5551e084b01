package upstreamside

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/rs/zerolog"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// rewriteOnce reads resp as the answer to id and writes it back with the
// result replaced by newResult (nil: unchanged).
func rewriteOnce(t *testing.T, resp *http.Response, id string, newResult string) (*httptest.ResponseRecorder, *Answer) {
	t.Helper()
	a, err := ReadAnswer(resp, json.RawMessage(id))
	if err != nil {
		t.Fatalf("readAnswer: %v", err)
	}
	defer a.Close()
	var msg json.RawMessage
	if newResult != "" {
		if msg, err = mcpwire.WithMember(a.Msg, "result", json.RawMessage(newResult)); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	a.Write(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil), zerolog.Nop(), msg)
	return rec, a
}

func TestRewriteJSONAnswer(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":7,"result":{"a":1,"unknown":{"deep":[1,2]}},"x-envelope":true}`
	rec, a := rewriteOnce(t, upstreamResponse("application/json", body), "7", `{"a":2,"unknown":{"deep":[1,2]}}`)
	if string(a.Result) != `{"a":1,"unknown":{"deep":[1,2]}}` {
		t.Errorf("result = %s", a.Result)
	}
	got := rec.Body.String()
	want := `{"id":7,"jsonrpc":"2.0","result":{"a":2,"unknown":{"deep":[1,2]}},"x-envelope":true}`
	if got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
	if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(want)) {
		t.Errorf("Content-Length = %s, want %d", cl, len(want))
	}
	if rec.Header().Get("Mcp-Session-Id") != "s-1" || rec.Header().Get("X-Custom") != "kept" ||
		rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("headers not kept: %v", rec.Header())
	}

	// Unchanged: the exact bytes.
	rec, _ = rewriteOnce(t, upstreamResponse("application/json", body), "7", "")
	if rec.Body.String() != body || rec.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Errorf("unchanged answer = %s (Content-Length %s)", rec.Body.String(), rec.Header().Get("Content-Length"))
	}

	// A JSON-RPC error has no result to change.
	_, a = rewriteOnce(t, upstreamResponse("application/json", `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"no"}}`), "7", "")
	if a.Result != nil {
		t.Errorf("error answer has result %s", a.Result)
	}
}

func TestRewriteSSEAnswer(t *testing.T) {
	// A notification and a request before the response (one with CRLF line
	// ends and a comment), the response with an event id and a data field
	// split over two lines, and an event after it.
	before := "event: message\r\nid: e1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\n" +
		": keep-alive\n\n" +
		"id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"7\",\"result\":{\"not\":\"ours: string id\"}}\n\n"
	response := "event: message\nid: e3\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\ndata:\"result\":{\"a\":1}}\n\n"
	after := "id: e4\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n"
	rec, a := rewriteOnce(t, upstreamResponse("text/event-stream", before+response+after), "7", `{"a":2}`)
	if string(a.Result) != `{"a":1}` {
		t.Errorf("result = %s", a.Result)
	}
	want := before + "event: message\nid: e3\n" +
		`data: {"id":7,"jsonrpc":"2.0","result":{"a":2}}` + "\n\n" + after
	if got := rec.Body.String(); got != want {
		t.Errorf("stream =\n%q\nwant\n%q", got, want)
	}
	if rec.Header().Get("Content-Length") != "" || rec.Header().Get("Mcp-Session-Id") != "s-1" {
		t.Errorf("headers: %v", rec.Header())
	}

	// Unchanged: the response's data comes back as received.
	rec, _ = rewriteOnce(t, upstreamResponse("text/event-stream", before+response), "7", "")
	if got := rec.Body.String(); got != before+"event: message\nid: e3\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\ndata: \"result\":{\"a\":1}}\n\n" {
		t.Errorf("unchanged stream = %q", got)
	}
}

func TestReadAnswerFailures(t *testing.T) {
	for name, body := range map[string]string{
		"stream ends before the response": "data: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n",
		"stream ends inside the response": "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n",
		"empty stream":                    "",
	} {
		if _, err := ReadAnswer(upstreamResponse("text/event-stream", body), json.RawMessage("7")); !errors.Is(err, errNoAnswer) {
			t.Errorf("%s: err = %v, want errNoAnswer", name, err)
		}
	}
	for _, tc := range []struct {
		status int
		ct, ce string
		want   bool
	}{
		{200, "application/json", "", true},
		{200, "text/event-stream; charset=utf-8", "", true},
		{200, "application/json", "gzip", false},
		{202, "", "", false},
		{404, "application/json", "", false},
		{200, "text/html", "", false},
	} {
		resp := &http.Response{StatusCode: tc.status, Header: http.Header{"Content-Type": {tc.ct}}}
		if tc.ce != "" {
			resp.Header.Set("Content-Encoding", tc.ce)
		}
		if got := Rewritable(resp); got != tc.want {
			t.Errorf("rewritable(%d %s %s) = %v", tc.status, tc.ct, tc.ce, got)
		}
	}
}

func TestSameID(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{`1`, `1`, true}, {`1`, `1.0`, true}, {`"a"`, `"\u0061"`, true},
		{`1`, `"1"`, false}, {`"a"`, `"b"`, false}, {``, `1`, false}, {`null`, `null`, true},
	} {
		if got := mcpwire.SameID(json.RawMessage(tc.a), json.RawMessage(tc.b)); got != tc.want {
			t.Errorf("mcpwire.SameID(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

// TestPresentsTasks: the session versions whose 2025-11-25 clients get the
// gateway's tasks (taskgate tools reports the others as pass-through).
func TestPresentsTasks(t *testing.T) {
	for v, want := range map[string]bool{"": true, "2026-07-28": true, "2025-11-25": true, "2025-06-18": true,
		"2025-03-26": true, "2024-11-05": true, "2024-10-07": false} {
		if got := PresentsTasks(v); got != want {
			t.Errorf("PresentsTasks(%q) = %v, want %v", v, got, want)
		}
	}
}
