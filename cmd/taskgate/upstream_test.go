package main

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/upstream"
)

// TestStdioFlagErrors: the stdio flags are checked at start, each error one
// line naming the flag.
func TestStdioFlagErrors(t *testing.T) {
	cmd := "--upstream-command=cat"
	up := "--upstream=http://127.0.0.1:1/mcp"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", cmd, "--upstream-shared", "--upstream-per-session"}, "give --upstream-shared or --upstream-per-session, not both"},
		{[]string{"serve", cmd, "--upstream-max-message", "huge"}, `invalid --upstream-max-message "huge"`},
		{[]string{"serve", cmd, "--upstream-max-message", "3GiB"}, "invalid --upstream-max-message \"3GiB\": at most 2GiB"},
		{[]string{"serve", cmd, "--max-sessions", "0"}, "invalid --max-sessions 0"},
		{[]string{"serve", cmd, "--max-sessions-per-principal", "-2"}, "invalid --max-sessions-per-principal -2"},
		{[]string{"serve", cmd, "--session-idle", "-1s"}, "invalid --session-idle -1s"},
		{[]string{"serve", up, "--upstream-shared"}, "--upstream-shared goes with --upstream-command"},
		{[]string{"serve", up, "--upstream-max-message", "1MiB"}, "--upstream-max-message goes with --upstream-command"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		err := run(append([]string{"taskgate"}, tt.args...), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line containing %q", tt.args, err, tt.want)
		}
	}
}

// TestProbeHeader: the transport probes carry the operator's headers,
// and the URL's credentials as Basic authorization only when it has some.
func TestProbeHeader(t *testing.T) {
	opts := upstream.Options{Header: http.Header{"X-Api-Key": {"k"}}}
	if h := probeHeader(opts, nil); h.Get("Authorization") != "" || h.Get("X-Api-Key") != "k" {
		t.Errorf("without credentials: %v", h)
	}
	if h := probeHeader(opts, url.UserPassword("u", "p")); h.Get("Authorization") != "Basic dTpw" {
		t.Errorf("with u:p: %v", h)
	}
	if _, err := parseTransport("grpc"); err == nil || !strings.Contains(err.Error(), "want auto, streamable-http or sse") {
		t.Errorf("parseTransport(grpc): %v", err)
	}
}
