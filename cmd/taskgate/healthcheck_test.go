package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// startGateway serves a real gateway (embedded store) in front of the test
// upstream, which serves MCP at /mcp, reached at upstreamPath; the tools
// named run as tasks (none: no policy). It returns the gateway's base URL.
func startGateway(t *testing.T, upstreamPath string, tools ...string) string {
	t.Helper()
	up := httptest.NewServer(testupstream.Mux(testupstream.Options{}))
	t.Cleanup(up.Close)
	client, err := upstream.New(up.URL+upstreamPath, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	emb, err := taskstore.OpenEmbedded(zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	store := taskstore.New(emb.Client(), taskstore.Options{})
	cfg := gateway.Config{Upstream: client, Store: store, PollLimit: -1}
	if len(tools) > 0 {
		var rules policy.Rules
		for _, tool := range tools {
			r, err := policy.NewRule(tool, policy.Task)
			if err != nil {
				t.Fatal(err)
			}
			rules = append(rules, r)
		}
		cfg.Policy = policy.NewCurrent(&policy.Config{Rules: rules})
	}
	h, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(); _ = store.Close() })
	_ = h.CheckUpstream(context.Background())
	gw := httptest.NewServer(h)
	t.Cleanup(gw.Close)
	return gw.URL
}

// TestHealthcheckGateway: healthcheck against a real gateway, given its
// base URL (it probes /readyz) or /readyz itself; a gateway whose upstream
// URL lacks /mcp is ready (its store answers) and the line says what is
// wrong with the upstream; a URL that is no gateway's says how to fix it.
func TestHealthcheckGateway(t *testing.T) {
	good := startGateway(t, "/mcp")
	for _, url := range []string{good, good + "/", good + "/readyz"} {
		var out bytes.Buffer
		if err := run([]string{"taskgate", "healthcheck", "--url", url}, &out, &bytes.Buffer{}); err != nil || out.String() != "ready\n" {
			t.Errorf("healthcheck --url %s: %v %q, want ready", url, err, out.String())
		}
	}
	wrong := startGateway(t, "")
	var out bytes.Buffer
	if err := run([]string{"taskgate", "healthcheck", "--url", wrong}, &out, &bytes.Buffer{}); err != nil || !strings.HasPrefix(out.String(), "ready; the upstream: not an MCP endpoint") {
		t.Errorf("healthcheck of a gateway with a wrong upstream path: %v %q", err, out.String())
	}
	for _, bad := range []string{"127.0.0.1:8080", "ftp://x"} {
		err := run([]string{"taskgate", "healthcheck", "--url", bad}, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "want the gateway's URL, e.g. http://127.0.0.1:8080") {
			t.Errorf("healthcheck --url %s: %v", bad, err)
		}
	}
	err := run([]string{"taskgate", "healthcheck", "--url", good + "/elsewhere"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "not ready: HTTP 404") {
		t.Errorf("healthcheck of another path: %v", err)
	}
}
