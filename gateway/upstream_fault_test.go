package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/upstream"
)

// newFaultRig is newHealthRig for an upstream served by srv at /mcp,
// reached with opts.
func newFaultRig(t *testing.T, srv *httptest.Server, opts upstream.Options) *healthRig {
	t.Helper()
	client, err := upstream.New(srv.URL+"/mcp", opts)
	if err != nil {
		t.Fatal(err)
	}
	rig := &healthRig{}
	rig.h, err = New(Config{Upstream: client, Store: newMiniStore(t), Logger: zerolog.New(gwtest.LockedWriter{W: &rig.logs, Mu: &rig.mu})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rig.h.Close() })
	gw := httptest.NewServer(rig.h)
	t.Cleanup(gw.Close)
	rig.base = gw.URL
	return rig
}

// TestUpstreamUntrustedCertificate: an https upstream whose certificate
// the gateway does not trust accepts TCP connections, so a dial said it
// was up while every call failed. The start check logs the fix at error
// (TLS, --upstream-ca), /readyz names TLS and the flag (not the
// address), and taskgate_upstream_up is 0; trusting its CA, all is well.
func TestUpstreamUntrustedCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(testupstream.Mux(testupstream.Options{}))
	t.Cleanup(srv.Close)
	rig := newFaultRig(t, srv, upstream.Options{})
	if err := rig.h.CheckUpstream(context.Background()); err == nil {
		t.Fatal("CheckUpstream = nil against an untrusted certificate")
	}
	if l := rig.lines("--upstream-ca"); len(l) != 1 || !strings.Contains(l[0], `"level":"error"`) || !strings.Contains(l[0], "TLS") {
		t.Errorf("log = %q, want one error line naming TLS and --upstream-ca", rig.lines(""))
	}
	status, body := rig.get(t, "/readyz")
	host := strings.TrimPrefix(srv.URL, "https://")
	if status != http.StatusOK || !strings.Contains(body, "TLS") || !strings.Contains(body, "--upstream-ca") || strings.Contains(body, host) {
		t.Errorf("/readyz = %d %s, want 200 naming TLS and --upstream-ca, without the address", status, body)
	}
	if up := upstreamUpMetric(t, rig); up != "0" {
		t.Errorf("taskgate_upstream_up = %s, want 0", up)
	}

	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	trusted := newFaultRig(t, srv, upstream.Options{TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if err := trusted.h.CheckUpstream(context.Background()); err != nil {
		t.Fatalf("CheckUpstream trusting the CA = %v", err)
	}
	if status, body := trusted.get(t, "/readyz"); status != http.StatusOK || !strings.Contains(body, `"upstream":"ok"`) {
		t.Errorf("/readyz trusting the CA = %d %s", status, body)
	}
	if up := upstreamUpMetric(t, trusted); up != "1" {
		t.Errorf("taskgate_upstream_up trusting the CA = %s, want 1", up)
	}
}

// TestUpstreamRefusesCredentials: an upstream that answers 401 to the
// credentials the gateway sends (--upstream-header) fails every call:
// the start log and /readyz name the flag, the gauge is 0, and /readyz's
// real exchange sees the upstream accept them again.
func TestUpstreamRefusesCredentials(t *testing.T) {
	var deny atomic.Bool
	deny.Store(true)
	mux := testupstream.Mux(testupstream.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if deny.Load() {
			w.Header().Set("WWW-Authenticate", `Bearer realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rig := newFaultRig(t, srv, upstream.Options{Header: http.Header{"Authorization": {"Bearer old"}}})
	if err := rig.h.CheckUpstream(context.Background()); err == nil {
		t.Fatal("CheckUpstream = nil, want the 401")
	}
	if l := rig.lines("--upstream-header"); len(l) != 1 || !strings.Contains(l[0], `"level":"error"`) {
		t.Errorf("log = %q, want one error line naming --upstream-header", rig.lines(""))
	}
	if status, body := rig.get(t, "/readyz"); status != http.StatusOK || !strings.Contains(body, "credentials (HTTP 401)") {
		t.Errorf("/readyz = %d %s, want the credentials named", status, body)
	}
	if up := upstreamUpMetric(t, rig); up != "0" {
		t.Errorf("taskgate_upstream_up = %s, want 0", up)
	}
	deny.Store(false)
	if status, body := rig.get(t, "/readyz"); status != http.StatusOK || !strings.Contains(body, `"upstream":"ok"`) {
		t.Errorf("/readyz once the upstream accepts = %d %s", status, body)
	}
	if up := upstreamUpMetric(t, rig); up != "1" {
		t.Errorf("taskgate_upstream_up once the upstream accepts = %s, want 1", up)
	}
}

// TestUpstreamWantsClientCredentials: without credentials of its own the
// gateway's 401 is normal (clients bring theirs: MCP Authorization), so
// /readyz stays ok and the start line is info, naming --upstream-header.
func TestUpstreamWantsClientCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	rig := newFaultRig(t, srv, upstream.Options{})
	if err := rig.h.CheckUpstream(context.Background()); err != nil {
		t.Fatalf("CheckUpstream = %v, want nil", err)
	}
	if l := rig.lines("--upstream-header"); len(l) != 1 || !strings.Contains(l[0], `"level":"info"`) {
		t.Errorf("log = %q, want one info line naming --upstream-header", rig.lines(""))
	}
	if status, body := rig.get(t, "/readyz"); status != http.StatusOK || !strings.Contains(body, `"upstream":"ok"`) {
		t.Errorf("/readyz = %d %s", status, body)
	}
}

// TestUpstreamRefusedConnection: nothing listens at the upstream's
// address: /readyz and the start log say to check the address.
func TestUpstreamRefusedConnection(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	rig := newFaultRig(t, srv, upstream.Options{})
	_ = rig.h.CheckUpstream(context.Background())
	if l := rig.lines("check the host and port of --upstream"); len(l) != 1 {
		t.Errorf("log = %q, want a line naming the address", rig.lines(""))
	}
	if _, body := rig.get(t, "/readyz"); !strings.Contains(body, "check the host and port of --upstream") {
		t.Errorf("/readyz = %s, want the address named", body)
	}
}
