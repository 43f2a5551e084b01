package upstream_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/upstream"
)

// countingServer serves h (a test upstream) and counts the connections
// opened to it (dials of the client under test).
func countingServer(t *testing.T, h http.Handler, tlsOn bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var dials atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			dials.Add(1)
		}
	}
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &dials
}

var modernMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func echoCall(t *testing.T, c *upstream.Client, s *upstream.Session, n int, meta string) {
	t.Helper()
	r, err := c.Call(context.Background(), s, toolCall(n, "echo", `{"text":"x"}`, meta), upstream.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := text(t, r); got != "x" {
		t.Fatalf("echo = %q", got)
	}
}

// transportGoroutines counts goroutines of net/http's client transport
// (persistConn readLoop/writeLoop): the own calls must have none.
func transportGoroutines() int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "net/http.(*persistConn)")
}

// TestOwnTransportReusesConnections: the client's own transport keeps one
// connection for sequential calls, legacy sessions (SSE and JSON answers,
// notifications, DELETE) and stateless ones alike.
func TestOwnTransportReusesConnections(t *testing.T) {
	for _, jsonResp := range []bool{false, true} {
		srv, dials := countingServer(t, testupstream.Handler(testupstream.Options{JSONResponse: jsonResp}), false)
		c, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, _, err := c.Initialize(context.Background(), nil, initParams)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ {
			echoCall(t, c, s, i+1, "")
		}
		if err := c.CloseSession(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if n := dials.Load(); n != 1 {
			t.Errorf("json=%v: initialize, 10 calls and DELETE opened %d connections, want 1", jsonResp, n)
		}
		if n := transportGoroutines(); n != 0 {
			t.Errorf("%d net/http transport goroutines, want none", n)
		}
	}
}

// TestOwnTransportConcurrentHeldCalls: held calls run on their callers'
// goroutines only, each on its own connection, which all go back to the
// pool and are reused by the next wave.
func TestOwnTransportConcurrentHeldCalls(t *testing.T) {
	rec := &testupstream.Recorder{}
	srv, dials := countingServer(t, testupstream.Handler(testupstream.Options{Stateless: true, Recorder: rec}), false)
	c, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &upstream.Session{ProtocolVersion: "2026-07-28"}
	const n = 20
	for wave := 0; wave < 2; wave++ {
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := c.Call(context.Background(), s, toolCall(1000*wave+i, "slow", `{"seconds":0.5}`, modernMeta), upstream.CallOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				if r.Error != nil {
					t.Error(r.Error)
				}
			}()
		}
		if wave == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := rec.WaitFor(ctx, "slow", testupstream.Called, n); err != nil {
				t.Fatal(err)
			}
			cancel()
			if g := transportGoroutines(); g != 0 {
				t.Errorf("%d net/http transport goroutines with %d held calls, want none", g, n)
			}
		}
		wg.Wait()
	}
	if d := dials.Load(); d > n+2 {
		t.Errorf("two waves of %d concurrent calls opened %d connections, want about %d", n, d, n)
	}
}

// TestOwnTransportCancelMidCall: cancelling a held call (Cancel, then the
// context) aborts it at once, the upstream hears of it, and nothing of the
// call is left running. This is the client's cancellation test: every call
// of its own goes through connTransport.
func TestOwnTransportCancelMidCall(t *testing.T) {
	rec := &testupstream.Recorder{}
	c := start(t, testupstream.Options{Recorder: rec})
	s := open(t, c)
	echoCall(t, c, s, 1, "") // connections and server goroutines warmed up
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, s, toolCall(10, "slow", `{"seconds":30}`, ""), upstream.CallOptions{})
		done <- err
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := rec.WaitFor(wctx, "slow", testupstream.Called, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(wctx, s, id(10), "test says stop"); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("call error = %v, want context.Canceled or none", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	if err := rec.WaitFor(wctx, "slow", testupstream.Cancelled, 1); err != nil {
		t.Errorf("upstream did not see the cancellation: %v", err)
	}
	// A cancel without a reply in flight: the read of the held response is
	// what ends, with the caller's error, not an unreachable upstream.
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		_, err := c.Call(ctx2, s, toolCall(11, "slow", `{"seconds":30}`, ""), upstream.CallOptions{})
		done <- err
	}()
	if err := rec.WaitFor(wctx, "slow", testupstream.Called, 2); err != nil {
		t.Fatal(err)
	}
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, upstream.ErrUnreachable) {
		t.Errorf("call error = %v, want context.Canceled", err)
	}
	// (The dropped connection alone does not stop the tool: MCP says it is
	// not a cancellation. Stop it so its server goroutine ends too.)
	if err := c.Cancel(wctx, s, id(11), "test says stop"); err != nil {
		t.Fatal(err)
	}
	if err := rec.WaitFor(wctx, "slow", testupstream.Cancelled, 2); err != nil {
		t.Errorf("upstream did not see the second cancellation: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base {
		t.Errorf("%d goroutines after the cancelled calls, %d before", g, base)
	}
}

// TestOwnTransportStaleIdleConnection: a pooled connection the server
// closed while it was idle is found dead before anything is written on it,
// and the POST goes out once, on a fresh connection.
func TestOwnTransportStaleIdleConnection(t *testing.T) {
	srv, dials := countingServer(t, testupstream.Handler(testupstream.Options{Stateless: true}), false)
	c, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &upstream.Session{ProtocolVersion: "2026-07-28"}
	for i := 0; i < 3; i++ {
		echoCall(t, c, s, 10*i+1, modernMeta)
		srv.CloseClientConnections() // the server drops the idle connection
		time.Sleep(20 * time.Millisecond)
		echoCall(t, c, s, 10*i+2, modernMeta)
	}
	if d := dials.Load(); d != 4 {
		t.Errorf("%d connections, want 4 (one, then one after each drop)", d)
	}
}

// TestOwnTransportTLS: https upstreams, with the client's TLS config,
// keep their connection too.
func TestOwnTransportTLS(t *testing.T) {
	srv, dials := countingServer(t, testupstream.Handler(testupstream.Options{}), true)
	tc := srv.Client().Transport.(*http.Transport).TLSClientConfig
	c, err := upstream.New(srv.URL+"/mcp", upstream.Options{TLSConfig: tc})
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, c)
	callElicit(t, c, s)
	for i := 0; i < 5; i++ {
		echoCall(t, c, s, 20+i, "")
	}
	// The held elicit call and its answer need two connections at once.
	if d := dials.Load(); d > 2 {
		t.Errorf("%d TLS connections, want at most 2", d)
	}
	// Without the test CA the handshake fails: an unreachable upstream.
	bad, _ := upstream.New(srv.URL+"/mcp", upstream.Options{})
	_, err = bad.Call(context.Background(), s, toolCall(1, "echo", `{}`, ""), upstream.CallOptions{})
	if !errors.Is(err, upstream.ErrUnreachable) || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("err = %v, want an unreachable upstream (TLS)", err)
	}
}

type countingRT struct {
	n  atomic.Int32
	rt http.RoundTripper
}

func (c *countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// TestOwnCallsUseInjectedTransport: Options.Transport carries every
// request, the client's own calls included, and the observer hears them.
func TestOwnCallsUseInjectedTransport(t *testing.T) {
	srv := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true}))
	defer srv.Close()
	rt := &countingRT{rt: http.DefaultTransport}
	c, err := upstream.New(srv.URL+"/mcp", upstream.Options{Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	var seen []upstream.Observation
	var mu sync.Mutex
	c.SetObserver(func(o upstream.Observation) { mu.Lock(); seen = append(seen, o); mu.Unlock() })
	echoCall(t, c, &upstream.Session{ProtocolVersion: "2026-07-28"}, 1, modernMeta)
	if rt.n.Load() != 1 {
		t.Errorf("injected transport carried %d requests, want 1", rt.n.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0].Method != "tools/call" || seen[0].Status != 200 || seen[0].Err != nil {
		t.Errorf("observed %+v", seen)
	}
}

// TestOwnTransportObserver: the observer hears own calls on the default
// transport as it did on net/http's, failures included.
func TestOwnTransportObserver(t *testing.T) {
	c := start(t, testupstream.Options{Stateless: true})
	var seen []upstream.Observation
	var mu sync.Mutex
	c.SetObserver(func(o upstream.Observation) { mu.Lock(); seen = append(seen, o); mu.Unlock() })
	echoCall(t, c, &upstream.Session{ProtocolVersion: "2026-07-28"}, 1, modernMeta)
	mu.Lock()
	if len(seen) != 1 || seen[0].Method != "tools/call" || seen[0].Status != 200 || seen[0].Err != nil {
		t.Errorf("observed %+v", seen)
	}
	mu.Unlock()
}
