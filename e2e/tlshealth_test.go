package e2e

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestUntrustedUpstreamCertificate: serve in front of an https upstream
// whose certificate it does not trust. A TCP dial reached it, so /readyz
// said ok and taskgate_upstream_up 1 while every call failed, and the
// start log told to give --upstream-transport sse. Now the start log,
// /readyz and the gauge name TLS and --upstream-ca; and taskgate call
// --ca with the upstream's certificate reaches it.
func TestUntrustedUpstreamCertificate(t *testing.T) {
	up := httptest.NewTLSServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	g := startGateway(t, up.URL+"/mcp")

	logged := g.stderr.String()
	if !strings.Contains(logged, "--upstream-ca") || !strings.Contains(logged, "TLS") || strings.Contains(logged, "give --upstream-transport sse") {
		t.Errorf("start log does not name TLS and --upstream-ca (or names the wrong fix):\n%s", logged)
	}
	if body := fetchBody(t, g.base+"/readyz"); !strings.Contains(body, "TLS") || !strings.Contains(body, "--upstream-ca") || strings.Contains(body, up.URL) {
		t.Errorf("/readyz = %s, want TLS and --upstream-ca named, without the address", body)
	}
	if m := fetchBody(t, g.base+"/metrics"); !strings.Contains(m, "\ntaskgate_upstream_up 0\n") {
		t.Errorf("taskgate_upstream_up is not 0:\n%s", linesWith(m, "taskgate_upstream_up"))
	}

	// Given as an HTTP+SSE server, the start check's GET says so too.
	if g := startGateway(t, up.URL+"/sse", "--upstream-transport", "sse"); !strings.Contains(g.stderr.String(), "--upstream-ca") {
		t.Errorf("start log with --upstream-transport sse does not name --upstream-ca:\n%s", g.stderr.String())
	}

	caFile := filepath.Join(t.TempDir(), "cert.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, taskgateBin, "call", up.URL+"/mcp", "echo", "text=trusted", "--ca", caFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "trusted") {
		t.Errorf("taskgate call --ca: %v\n%s", err, out)
	}
}

func fetchBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func linesWith(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
