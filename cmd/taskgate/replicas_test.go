package main

import (
	"context"
	"encoding/pem"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/upstream/stdio"
)

func TestAdvertiseURL(t *testing.T) {
	cidr := func(s string) net.Addr {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return n
	}
	host := func(list ...string) func() ([]net.Addr, error) {
		return func() ([]net.Addr, error) {
			var out []net.Addr
			for _, s := range list {
				out = append(out, cidr(s))
			}
			return out, nil
		}
	}
	loopback := []string{"127.0.0.1/8", "::1/128", "fe80::1/64"}
	tcp := func(s string) net.Addr { a, _ := net.ResolveTCPAddr("tcp", s); return a }
	for _, tc := range []struct {
		name, flag, listen, scheme string
		addrs                      func() ([]net.Addr, error)
		want, err                  string
	}{
		{"flag", "http://tg-0.tg:8080", "0.0.0.0:8080", "http", host(), "http://tg-0.tg:8080", ""},
		{"flag with slash", "https://10.1.2.3:9443/", "0.0.0.0:8080", "http", host(), "https://10.1.2.3:9443", ""},
		{"flag with path", "http://h:1/mcp", "0.0.0.0:8080", "http", host(), "", "invalid --advertise-url"},
		{"flag without scheme", "h:1", "0.0.0.0:8080", "http", host(), "", "invalid --advertise-url"},
		{"flag with user", "http://u:p@h:1", "0.0.0.0:8080", "http", host(), "", "invalid --advertise-url"},
		{"loopback listener", "", "127.0.0.1:8080", "http", host(), "http://127.0.0.1:8080", ""},
		{"specific listener", "", "10.0.0.5:8443", "https", host(), "https://10.0.0.5:8443", ""},
		{"ipv6 listener", "", "[fd00::5]:8080", "http", host(), "http://[fd00::5]:8080", ""},
		{"one address", "", "0.0.0.0:8080", "http", host(append(loopback, "10.0.0.7/24", "fd00::7/64")...), "http://10.0.0.7:8080", ""},
		{"one ipv6 address", "", "[::]:8080", "http", host(append(loopback, "2001:db8::7/64")...), "http://[2001:db8::7]:8080", ""},
		{"several addresses", "", "0.0.0.0:8080", "http", host("10.0.0.7/24", "192.168.1.7/24"), "", "several (10.0.0.7, 192.168.1.7): give --advertise-url http://HOST:8080"},
		{"loopback only", "", "0.0.0.0:8080", "http", host(loopback...), "", "none but loopback"},
		{"cannot list", "", "0.0.0.0:8080", "http", func() ([]net.Addr, error) { return nil, errors.New("no netlink") }, "", "no netlink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := advertiseURL(tc.flag, tcp(tc.listen), tc.scheme, tc.addrs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("advertiseURL = %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("advertiseURL = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestHopTLS: with --tls-cert the hop trusts that certificate (replicas
// usually serve the same one) on top of the system's roots.
func TestHopTLS(t *testing.T) {
	if cfg, err := hopTLS(""); cfg != nil || err != nil {
		t.Fatalf("no --tls-cert: %v, %v; want the defaults", cfg, err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	dir := t.TempDir()
	certFile := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := hopTLS(certFile)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("a replica serving --tls-cert is not trusted: %v", err)
	}
	resp.Body.Close()
	bad := filepath.Join(dir, "bad.pem")
	_ = os.WriteFile(bad, []byte("not PEM"), 0o600)
	if _, err := hopTLS(bad); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a --tls-cert without PEM: %v", err)
	}
}

// TestJoinReplicasStateless: a 2026-07-28 child with --upstream-shared
// serves every client from one process, so with --redis-url there is no
// session to follow: serve needs no advertise URL (none could be derived on
// a host with several addresses listening on 0.0.0.0) and joins nothing.
// Without --upstream-shared, each 2025-11-25 client of the same child gets
// a process of its own (issue 37), whose session must be followed: that
// bridge is one per session, and joins the replicas.
func TestJoinReplicasStateless(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "everything-server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server").CombinedOutput(); err != nil {
		t.Fatalf("building the 2026-07-28 server: %v\n%s", err, out)
	}
	perSession, err := stdio.Start(stdio.Options{Command: []string{bin}, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = perSession.Close(context.Background()) })
	if !perSession.PerSession() {
		t.Error("a 2026-07-28 child without --upstream-shared: not a process per session, so its 2025-11-25 sessions would not follow their process")
	}
	br, err := stdio.Start(stdio.Options{Command: []string{bin}, Shared: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Close(context.Background()) })
	set := flag.NewFlagSet("serve", flag.ContinueOnError)
	set.String("advertise-url", "", "")
	set.String("redis-url", "redis://127.0.0.1:1", "")
	set.String("path", "/mcp", "")
	c := cli.NewContext(nil, set, nil)
	c.Context = context.Background()
	h := http.NotFoundHandler()
	several := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	got, leave, err := joinReplicas(c, h, &openedUpstream{bridge: br}, &openedStore{}, several, "http", zerolog.Nop())
	if err != nil {
		t.Fatalf("a shared 2026-07-28 child with --redis-url: %v; want it served without joining the replicas", err)
	}
	leave()
	if reflect.ValueOf(got).Pointer() != reflect.ValueOf(h).Pointer() {
		t.Error("a shared 2026-07-28 child with --redis-url serves the hop")
	}
	_ = set.Set("advertise-url", "http://h:1")
	if _, _, err := joinReplicas(c, h, &openedUpstream{bridge: br}, &openedStore{}, several, "http", zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "process per session") {
		t.Errorf("--advertise-url with a shared 2026-07-28 child: %v", err)
	}
}
