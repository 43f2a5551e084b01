package upstream

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func (t *connTransport) idleCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, conns := range t.idle {
		n += len(conns)
	}
	return n
}

// TestConnTransportIdlePool: bodies read to their end give their
// connection back, up to maxIdle; idle connections expire on their own.
func TestConnTransportIdlePool(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	ct := newConnTransport(Options{MaxIdleConnsPerHost: 2}, http.DefaultTransport)
	ct.idleTimeout = 100 * time.Millisecond
	get := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := ct.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var resps []*http.Response
	for i := 0; i < 3; i++ {
		resps = append(resps, get())
	}
	for _, r := range resps {
		if b, err := io.ReadAll(r.Body); err != nil || string(b) != "ok" {
			t.Fatalf("body %q, %v", b, err)
		}
		r.Body.Close()
	}
	if n := ct.idleCount(); n != 2 {
		t.Errorf("%d idle connections, want 2 (the cap)", n)
	}
	// A body closed before its end closes its connection.
	r := get()
	r.Body.Close()
	if n := ct.idleCount(); n != 1 {
		t.Errorf("%d idle connections after an early close, want 1", n)
	}
	time.Sleep(300 * time.Millisecond)
	ct.mu.Lock()
	n, reaper := len(ct.idle), ct.reaper
	ct.mu.Unlock()
	if n != 0 || reaper != nil {
		t.Errorf("after the idle timeout: %d endpoints with idle connections, reaper %v", n, reaper)
	}
}

// TestConnTransportRefusesHeaderInjection: as net/http's transport does.
func TestConnTransportRefusesHeaderInjection(t *testing.T) {
	ct := newConnTransport(Options{}, http.DefaultTransport)
	for _, h := range []http.Header{
		{"Authorization": {"Bearer x\r\nX-Evil: 1"}},
		{"Bad Name": {"v"}},
		{"": {"v"}},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
		req.Header = h
		if _, err := ct.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "invalid header") {
			t.Errorf("header %q: err = %v, want invalid header", h, err)
		}
	}
}

// TestReasonNamesNoAddress: the phrase clients see for a transport error
// names what happened, never an address or host name.
func TestReasonNamesNoAddress(t *testing.T) {
	addr := &net.TCPAddr{IP: net.ParseIP("10.9.8.7"), Port: 3000}
	for _, err := range []error{
		&net.OpError{Op: "read", Net: "tcp", Source: addr, Addr: addr, Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}},
		&net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: errors.New("some new failure")},
		&net.DNSError{Err: "no such host", Name: "internal.corp.example", IsNotFound: true},
		&tls.CertificateVerificationError{Err: errors.New("x509: certificate is valid for internal.corp.example, not 10.9.8.7")},
	} {
		got := Reason(err)
		if strings.Contains(got, "10.9.8.7") || strings.Contains(got, "corp") || got == "" {
			t.Errorf("Reason(%v) = %q: names an address", err, got)
		}
	}
}
