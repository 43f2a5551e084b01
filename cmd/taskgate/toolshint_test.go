package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestToolsDidYouMeanMCP: a server that answers 404 at the root is told
// the likely endpoint, as serve and call tell it.
func TestToolsDidYouMeanMCP(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	err := run([]string{"taskgate", "tools", "--upstream", srv.URL, "--upstream-transport", "streamable-http"}, &bytes.Buffer{}, &bytes.Buffer{})
	if want := "did you mean " + srv.URL + "/mcp?"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

// TestToolsWarningsHuman: tools' warnings are plain lines, not JSON.
func TestToolsWarningsHuman(t *testing.T) {
	var errOut bytes.Buffer
	err := run([]string{"taskgate", "tools", "--upstream", "http://127.0.0.1:1/mcp"}, &bytes.Buffer{}, &errOut)
	if err == nil {
		t.Fatal("an unreachable upstream listed")
	}
	if s := errOut.String(); strings.Contains(s, `"level"`) || !strings.HasPrefix(s, "WRN the upstream is unreachable") {
		t.Errorf("stderr = %q, want a plain WRN line", s)
	}
}
