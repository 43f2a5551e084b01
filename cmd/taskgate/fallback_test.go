package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFallbackClashAtStart: an upstream tool with a fallback tool's name
// stops serve with a one-line error naming it.
func TestFallbackClashAtStart(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "clash", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "taskgate_task_status", Description: "the upstream's own"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)
	var out, errOut bytes.Buffer
	err := run([]string{"taskgate", "serve", "--upstream", up.URL, "--listen", "127.0.0.1:0", "--fallback-tools"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), `the upstream has a tool named "taskgate_task_status"`) ||
		!strings.Contains(err.Error(), "--fallback-prefix") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("serve: %v, want one line naming the clash and --fallback-prefix", err)
	}
}
