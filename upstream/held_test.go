package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/upstream"
)

// asyncResult is what CallAsync's done received.
type asyncResult struct {
	r   *jsonrpc.Response
	err error
}

// callAsync starts a CallAsync and returns where its outcome arrives, once
// CallAsync itself returned.
func callAsync(ctx context.Context, c *upstream.Client, s *upstream.Session, req *jsonrpc.Request, opts upstream.CallOptions) <-chan asyncResult {
	out := make(chan asyncResult, 1)
	c.CallAsync(ctx, s, req, opts, func(r *jsonrpc.Response, err error) { out <- asyncResult{r, err} })
	return out
}

// waiterStacks are the stacks of the goroutines waiting apart for an
// upstream's answer (awaitReadable), once there are n of them.
func waiterStacks(t *testing.T, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("no %d goroutines waiting apart for the upstream", n)
		}
		var b bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
		var found []string
		for _, g := range strings.Split(b.String(), "\n\n") {
			if strings.Contains(g, "[IO wait") && strings.Contains(g, "upstream.waitReadable") {
				found = append(found, g)
			}
		}
		if len(found) >= n {
			return found
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkShallow: a waiting goroutine holds nothing of the call's path on
// its stack (which is what lets it wait on the smallest stack).
func checkShallow(t *testing.T, stacks []string) {
	t.Helper()
	for _, g := range stacks {
		for _, deep := range []string{"CallAsync", "nextEvent", "answer", "receive", "(*Client)", "testing.tRunner"} {
			if strings.Contains(strings.SplitN(g, "created by", 2)[0], deep) {
				t.Errorf("a goroutine waiting for the upstream has %s on its stack:\n%s", deep, g)
			}
		}
	}
}

// sseServer is an upstream whose one tools/call answer is an SSE stream
// the test writes: script gets the request's id and a function that
// writes one chunk of the stream and flushes it.
func sseServer(t *testing.T, script func(r *http.Request, id json.RawMessage, write func(string))) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		script(r, req.ID, func(s string) {
			_, _ = io.WriteString(w, s)
			w.(http.Flusher).Flush()
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func event(msg string) string { return "event: message\ndata: " + msg + "\n\n" }

// TestCallAsyncAnswers: CallAsync returns once the request is written;
// the answer, when the upstream gives it, reaches done, read by a
// goroutine that waited with nothing of the call on its stack. The
// connection is reused by the next call, CallAsync's or Call's.
func TestCallAsyncAnswers(t *testing.T) {
	for _, jsonResp := range []bool{false, true} {
		rec := &testupstream.Recorder{}
		release := make(chan struct{})
		up := testupstream.Handler(testupstream.Options{Stateless: true, JSONResponse: jsonResp, Recorder: rec})
		srv, dials := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release // the first call waits for the test
			up.ServeHTTP(w, r)
		}), false)
		c, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var observed atomic.Int32
		c.SetObserver(func(o upstream.Observation) {
			if o.Method == "tools/call" && o.Status == 200 && o.Err == nil {
				observed.Add(1)
			}
		})
		s := &upstream.Session{ProtocolVersion: "2026-07-28"}
		out := callAsync(context.Background(), c, s, toolCall(1, "slow", `{"seconds":0.1,"text":"held"}`, modernMeta), upstream.CallOptions{})
		checkShallow(t, waiterStacks(t, 1))
		close(release)
		res := <-out
		if res.err != nil {
			t.Fatalf("json=%v: %v", jsonResp, res.err)
		}
		if got, _ := text(t, res.r); !strings.HasSuffix(got, ": held") {
			t.Errorf("json=%v: slow = %q, want it held", jsonResp, got)
		}
		res = <-callAsync(context.Background(), c, s, toolCall(2, "echo", `{"text":"x"}`, modernMeta), upstream.CallOptions{})
		if res.err != nil {
			t.Fatal(res.err)
		}
		echoCall(t, c, s, 3, modernMeta)
		if n := dials.Load(); n != 1 {
			t.Errorf("json=%v: three calls opened %d connections, want 1", jsonResp, n)
		}
		if n := observed.Load(); n != 3 {
			t.Errorf("json=%v: observer heard %d calls, want 3", jsonResp, n)
		}
	}
}

// TestCallAsyncStream: an SSE answer whose events come one by one, each
// after the client acted on the previous one (so the client waits between
// them): notifications, a keep-alive comment, a server→client request,
// a response to another request, then the answer. Each wait is on a
// goroutine of its own, and the callbacks hear everything in order.
func TestCallAsyncStream(t *testing.T) {
	step := make(chan string, 8)
	release := make(chan struct{})
	srv := sseServer(t, func(r *http.Request, id json.RawMessage, write func(string)) {
		write(event(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`))
		<-step
		<-release // the client waits for the next event meanwhile
		write(": keep-alive\n\n")
		write(event(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":2}}`))
		<-step
		write(event(`{"jsonrpc":"2.0","id":"ask-1","method":"elicitation/create","params":{}}`))
		<-step
		write(event(`{"jsonrpc":"2.0","id":"someone-else","result":{}}`))
		write("event: message\ndata: ")
		write(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"streamed"}]}}` + "\n\n")
	})
	c, err := upstream.New(srv.URL, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var heard []string
	out := callAsync(context.Background(), c, &upstream.Session{}, toolCall(7, "x", `{}`, ""), upstream.CallOptions{
		OnNotification: func(n *jsonrpc.Request) {
			heard = append(heard, n.Method+string(n.Params))
			step <- "next"
		},
		OnRequest: func(m *jsonrpc.Request) {
			heard = append(heard, m.Method)
			step <- "next"
		},
	})
	checkShallow(t, waiterStacks(t, 1))
	close(release)
	res := <-out
	if res.err != nil {
		t.Fatal(res.err)
	}
	if got, _ := text(t, res.r); got != "streamed" {
		t.Errorf("answer %q, want streamed", got)
	}
	want := []string{`notifications/progress{"progress":1}`, `notifications/progress{"progress":2}`, "elicitation/create"}
	if fmt.Sprint(heard) != fmt.Sprint(want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
}

// TestCallAsyncCancel: a call cancelled while it waits (for the answer's
// headers, or between events of its stream) ends as Call does, and nothing
// of it keeps waiting.
func TestCallAsyncCancel(t *testing.T) {
	for _, stage := range []string{"headers", "stream"} {
		t.Run(stage, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body) // so the server sees the client leave
				if stage == "stream" {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					_, _ = io.WriteString(w, event(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`))
					w.(http.Flusher).Flush()
				}
				<-r.Context().Done()
			}))
			defer srv.Close()
			c, err := upstream.New(srv.URL, upstream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, async := range []bool{false, true} {
				ctx, cancel := context.WithCancel(context.Background())
				var out <-chan asyncResult
				if async {
					out = callAsync(ctx, c, &upstream.Session{}, toolCall(1, "x", `{}`, ""), upstream.CallOptions{})
					checkShallow(t, waiterStacks(t, 1))
				} else {
					ch := make(chan asyncResult, 1)
					go func() {
						r, err := c.Call(ctx, &upstream.Session{}, toolCall(1, "x", `{}`, ""), upstream.CallOptions{})
						ch <- asyncResult{r, err}
					}()
					out = ch
				}
				cancel()
				res := <-out
				if res.r != nil || !errors.Is(res.err, context.Canceled) || errors.Is(res.err, upstream.ErrUnreachable) {
					t.Errorf("async=%v: %v, %v; want context.Canceled", async, res.r, res.err)
				}
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				var b bytes.Buffer
				_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
				if !strings.Contains(b.String(), "upstream.awaitReadable") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("a cancelled call still waits:\n%s", b.String())
				}
			}
		})
	}
}

// TestCallAsyncUpstreamGone: an upstream that drops the connection while
// the call waits (before any answer, or inside its stream) gives CallAsync
// the error Call gets.
func TestCallAsyncUpstreamGone(t *testing.T) {
	for _, stage := range []string{"headers", "headers, reset", "stream", "stream, reset", "partial event"} {
		t.Run(stage, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				conn, brw, err := w.(http.Hijacker).Hijack()
				if err != nil {
					return
				}
				if strings.HasSuffix(stage, "reset") {
					_ = conn.(*net.TCPConn).SetLinger(0) // close with a reset
				}
				defer conn.Close()
				if !strings.HasPrefix(stage, "headers") {
					brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
					chunk := event(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`)
					if stage == "partial event" {
						chunk += "event: message\ndata: {\"jsonrpc\""
					}
					fmt.Fprintf(brw, "%x\r\n%s\r\n", len(chunk), chunk)
					brw.Flush()
					// The client reads the event and waits for the next.
					time.Sleep(50 * time.Millisecond)
				}
				brw.Flush()
			}))
			defer srv.Close()
			c, err := upstream.New(srv.URL, upstream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r, syncErr := c.Call(context.Background(), &upstream.Session{}, toolCall(1, "x", `{}`, ""), upstream.CallOptions{})
			if r != nil || syncErr == nil {
				t.Fatalf("Call = %v, %v; want an error", r, syncErr)
			}
			res := <-callAsync(context.Background(), c, &upstream.Session{}, toolCall(1, "x", `{}`, ""), upstream.CallOptions{})
			if res.r != nil || res.err == nil || res.err.Error() != syncErr.Error() {
				t.Errorf("CallAsync = %v, %v; want Call's error %v", res.r, res.err, syncErr)
			}
			want := upstream.ErrNoResponse
			if strings.HasPrefix(stage, "headers") {
				want = upstream.ErrUnreachable
			}
			if strings.HasSuffix(stage, "reset") && !strings.Contains(res.err.Error(), "reset") {
				t.Errorf("CallAsync error %v, want the reset named", res.err)
			}
			if !errors.Is(res.err, want) {
				t.Errorf("CallAsync error %v, want %v", res.err, want)
			}
		})
	}
}

// TestCallAsyncStatusAndInvalid: what is no stream (an error status, a bad
// request) ends as Call ends it.
func TestCallAsyncStatusAndInvalid(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such thing", http.StatusBadRequest)
	}))
	defer srv.Close()
	c, err := upstream.New(srv.URL, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := <-callAsync(context.Background(), c, &upstream.Session{}, toolCall(1, "x", `{}`, ""), upstream.CallOptions{})
	var se *upstream.StatusError
	if !errors.As(res.err, &se) || se.Status != http.StatusBadRequest || se.Body != "no such thing" {
		t.Errorf("err = %v, want the upstream's 400", res.err)
	}
	res = <-callAsync(context.Background(), c, &upstream.Session{}, &jsonrpc.Request{Method: "tools/call"}, upstream.CallOptions{})
	if res.err == nil || !strings.Contains(res.err.Error(), "request has no id") {
		t.Errorf("err = %v, want a request without id refused", res.err)
	}
}

// TestCallAsyncTLS: over TLS (where a socket cannot be watched without
// reading it) CallAsync answers as Call does, on the calling goroutine.
func TestCallAsyncTLS(t *testing.T) {
	srv, dials := countingServer(t, testupstream.Handler(testupstream.Options{Stateless: true}), true)
	tc := srv.Client().Transport.(*http.Transport).TLSClientConfig
	c, err := upstream.New(srv.URL+"/mcp", upstream.Options{TLSConfig: tc})
	if err != nil {
		t.Fatal(err)
	}
	s := &upstream.Session{ProtocolVersion: "2026-07-28"}
	for i := 0; i < 3; i++ {
		res := <-callAsync(context.Background(), c, s, toolCall(i, "echo", `{"text":"tls"}`, modernMeta), upstream.CallOptions{})
		if res.err != nil {
			t.Fatal(res.err)
		}
		if got, _ := text(t, res.r); got != "tls" {
			t.Errorf("echo = %q", got)
		}
	}
	if d := dials.Load(); d != 1 {
		t.Errorf("%d TLS connections, want 1", d)
	}
}
