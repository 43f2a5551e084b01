package sse

// Which transport a server URL speaks.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// Transport names, as --upstream-transport takes them.
const (
	StreamableHTTP = "streamable-http"
	SSE            = "sse"
)

// Detection is what Detect found.
type Detection struct {
	// Transport is StreamableHTTP or SSE; empty when the server answered
	// neither way.
	Transport string
	// Why says what the probes saw, for the log.
	Why string
}

// probeInit is the InitializeRequest Detect POSTs.
var probeInit = []byte(`{"jsonrpc":"2.0","id":"taskgate-probe","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"taskgate","version":"probe"}}}`)

// Detect tells which transport the server at u speaks, as MCP 2025-03-26
// describes for clients (Transports, "Backwards Compatibility"): POST an
// InitializeRequest; if that fails with 400, 404 or 405, GET the URL,
// expecting an SSE stream whose first event is "endpoint". A 400 whose
// body is a JSON-RPC error is a Streamable HTTP server's answer (a modern
// server refuses a version so, MCP 2026-07-28, Transports, "Backward
// Compatibility"). header goes with both probes (the operator's
// credentials). A session the POST opened is deleted again. The error is
// set only when the server could not be reached at all.
func Detect(ctx context.Context, rt http.RoundTripper, u *url.URL, header http.Header) (Detection, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(probeInit))
	if err != nil {
		return Detection{}, err
	}
	setHeader(req.Header, header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return Detection{}, fmt.Errorf("POST initialize to %s: %w", u.Redacted(), err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	post := fmt.Sprintf("POST initialize: HTTP %d", resp.StatusCode)
	switch {
	case resp.StatusCode/100 == 2:
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			deleteSession(ctx, rt, u, header, id)
		}
		return Detection{Transport: StreamableHTTP, Why: post}, nil
	case resp.StatusCode == http.StatusBadRequest && isJSONRPCError(body):
		return Detection{Transport: StreamableHTTP, Why: post + " with a JSON-RPC error (a Streamable HTTP server's refusal)"}, nil
	case resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed:
		return Detection{Transport: StreamableHTTP, Why: post + " (not 400, 404 or 405: no reason to try HTTP+SSE)"}, nil
	}
	get, ok, _ := probeStream(ctx, rt, u, header)
	if ok {
		return Detection{Transport: SSE, Why: post + "; GET: an SSE stream that begins with an endpoint event"}, nil
	}
	return Detection{Why: post + quoteBody(body[:min(len(body), 200)]) + "; GET: " + get}, nil
}

// Probe checks that u is an HTTP+SSE server's endpoint, for a transport
// given rather than detected: nil when a GET opens a stream whose first
// event names an endpoint on u's origin; else an error saying what came
// instead. unreachable is set when no answer came at all.
func Probe(ctx context.Context, rt http.RoundTripper, u *url.URL, header http.Header) (unreachable bool, err error) {
	why, ok, reachErr := probeStream(ctx, rt, u, header)
	switch {
	case reachErr != nil:
		return true, fmt.Errorf("GET %s: %w", u.Redacted(), reachErr)
	case !ok:
		return false, fmt.Errorf("GET %s: %s", u.Redacted(), why)
	}
	return false, nil
}

// probeStream GETs u and reports whether it is an HTTP+SSE server's
// stream (its first event "endpoint", on u's origin), or else what it was
// (reachErr: no answer at all). The stream is closed at once, which ends
// the session it opened.
func probeStream(ctx context.Context, rt http.RoundTripper, u *url.URL, header http.Header) (why string, ok bool, reachErr error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err.Error(), false, err
	}
	setHeader(req.Header, header)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err.Error(), false, err
	}
	defer resp.Body.Close()
	if err := checkStream(resp); err != nil {
		return err.Error(), false, nil
	}
	if _, err := firstEndpoint(mcpwire.NewReader(resp.Body, 64<<10), u); err != nil {
		return "an SSE stream, but " + err.Error(), false, nil
	}
	return "", true, nil
}

func setHeader(dst, src http.Header) {
	for k, vv := range src {
		dst[k] = vv
	}
}

// isJSONRPCError reports whether body is a JSON-RPC error response.
func isJSONRPCError(body []byte) bool {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		Error   json.RawMessage `json:"error"`
	}
	return json.Unmarshal(bytes.TrimSpace(body), &m) == nil && m.JSONRPC == "2.0" && mcpwire.IsObject(m.Error)
}

// deleteSession ends the session a probe opened (MCP 2025-11-25,
// Transports, "Session Management": DELETE with its id).
func deleteSession(ctx context.Context, rt http.RoundTripper, u *url.URL, header http.Header, id string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u.String(), nil)
	if err != nil {
		return
	}
	setHeader(req.Header, header)
	req.Header.Set("Mcp-Session-Id", id)
	if resp, err := rt.RoundTrip(req); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
	}
}
