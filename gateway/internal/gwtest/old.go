package gwtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/upstream/sse"
)

// OldUpstream is a go-sdk server limited to 2024-11-05, served over
// Streamable HTTP ("http") or go-sdk's HTTP+SSE handler ("sse"), and the
// upstream client the gateway reaches it with (issue 28).
func OldUpstream(t *testing.T, transport string, opts testupstream.Options) (string, *upstream.Client) {
	t.Helper()
	opts.ProtocolVersion = "2024-11-05"
	if transport == "http" {
		srv := httptest.NewServer(testupstream.Handler(opts))
		t.Cleanup(srv.Close)
		c, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return srv.URL + "/mcp", c
	}
	s := testupstream.NewServer(opts)
	srv := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	url := srv.URL + "/sse"
	br, err := sse.New(sse.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Close(context.Background()) })
	c, err := upstream.New(url, upstream.Options{Transport: br.Transport()})
	if err != nil {
		t.Fatal(err)
	}
	return url, c
}

// OldTransports are the transports OldUpstream serves on.
var OldTransports = []string{"http", "sse"}
