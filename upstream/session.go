package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// InitializeResult is the part of the upstream's initialize result the
// gateway needs; Raw keeps all of it.
type InitializeResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	Raw             json.RawMessage `json:"-"`
}

// Initialize opens a session on a legacy (session-based) upstream: it sends
// initialize with params, then notifications/initialized, and returns the
// session for later calls, at the version the upstream chose. header
// (typically the client's Authorization) is sent on every request of the
// session. MCP lifecycle: InitializeRequest in the MCP 2025-11-25 schema.
func (c *Client) Initialize(ctx context.Context, header http.Header, params json.RawMessage) (*Session, *InitializeResult, error) {
	req := &jsonrpc.Request{ID: initializeID, Method: "initialize", Params: params}
	s := &Session{Header: header}
	resp, h, err := c.call(ctx, s, req, CallOptions{})
	if err != nil {
		return nil, nil, err
	}
	if resp.Error != nil {
		return nil, nil, fmt.Errorf("the upstream refused initialize: %w", resp.Error)
	}
	res := &InitializeResult{Raw: resp.Result}
	if err := json.Unmarshal(resp.Result, res); err != nil || res.ProtocolVersion == "" {
		return nil, nil, &ProtocolError{URL: c.URL(), Err: fmt.Errorf("initialize result has no protocolVersion")}
	}
	s.ID = h.Get("Mcp-Session-Id")
	s.ProtocolVersion = res.ProtocolVersion
	if err := c.Notify(ctx, s, "notifications/initialized", struct{}{}); err != nil {
		return nil, nil, err
	}
	return s, res, nil
}

// CloseSession ends session s with an HTTP DELETE (Streamable HTTP,
// "Session Management"). A 405 (the server does not allow clients to end
// sessions) and a 404 (already gone) are not errors.
func (c *Client) CloseSession(ctx context.Context, s *Session) error {
	if s == nil || s.ID == "" {
		return nil
	}
	req, err := c.newRequest(ctx, http.MethodDelete, nil)
	if err != nil {
		return err
	}
	for k, vv := range s.Header {
		req.Header[k] = vv
	}
	c.setHeader(req.Header)
	req.Header.Set("Mcp-Session-Id", s.ID)
	if s.ProtocolVersion != "" {
		req.Header.Set("MCP-Protocol-Version", s.ProtocolVersion)
	}
	resp, err := c.own.RoundTrip(req)
	if err != nil {
		return c.unreachable(err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300, resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusMethodNotAllowed:
		return nil
	}
	return &StatusError{URL: c.URL(), Status: resp.StatusCode}
}

// initializeID is the id of the gateway's own initialize requests.
var initializeID, _ = jsonrpc.MakeID("taskgate-initialize")
