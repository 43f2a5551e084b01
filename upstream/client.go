package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Options configure a Client. Every field is optional.
type Options struct {
	// Transport carries all requests. When nil, a pooled transport sized
	// for a gateway is used (see NewTransport).
	Transport http.RoundTripper
	// DialTimeout bounds connecting to the upstream. Zero means 10s.
	// It bounds only the dial: a call itself runs as long as its context allows.
	DialTimeout time.Duration
	// MaxIdleConnsPerHost sizes the idle pool. Zero means 1024.
	MaxIdleConnsPerHost int
	// TLSConfig is used for https upstreams. Nil means Go's defaults.
	TLSConfig *tls.Config
}

// Client talks to one upstream MCP endpoint. It is safe for concurrent use.
type Client struct {
	url *url.URL
	rt  http.RoundTripper
}

// New returns a client of the MCP endpoint at rawURL (http or https).
func New(rawURL string, opts Options) (*Client, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	rt := opts.Transport
	if rt == nil {
		rt = NewTransport(opts)
	}
	return &Client{url: u, rt: rt}, nil
}

// ParseURL checks that rawURL names an http(s) endpoint with a host.
func ParseURL(rawURL string) (*url.URL, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("upstream URL is empty")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("upstream URL %q is not a URL: %v", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("upstream URL %q must start with http:// or https://", rawURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("upstream URL %q has no host", rawURL)
	}
	return u, nil
}

// NewTransport returns the pooled transport a Client uses by default.
// It never times out a response: MCP tool calls may run for many minutes.
func NewTransport(opts Options) *http.Transport {
	dial := opts.DialTimeout
	if dial <= 0 {
		dial = 10 * time.Second
	}
	perHost := opts.MaxIdleConnsPerHost
	if perHost <= 0 {
		perHost = 1024
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          0, // no global cap; the per-host cap applies
		MaxIdleConnsPerHost:   perHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   dial,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       opts.TLSConfig,
		// Pass-through forwards the client's Accept-Encoding and the
		// upstream's encoded body untouched; our own calls ask for identity.
		DisableCompression: true,
	}
}

// URL returns the upstream endpoint.
func (c *Client) URL() string { return c.url.String() }

// Forward sends one HTTP request to the upstream endpoint with the given
// method, end-to-end headers and body, and returns the raw response. The
// caller must close the response body. Redirects are not followed: a 3xx
// reaches the client as the upstream sent it.
//
// body may be nil (GET, DELETE). If body is an *bytes.Reader its length is
// sent as Content-Length.
func (c *Client) Forward(ctx context.Context, method string, header http.Header, body io.Reader) (*http.Response, error) {
	req, err := c.newRequest(ctx, method, body)
	if err != nil {
		return nil, err
	}
	CopyHeader(req.Header, header)
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return nil, c.unreachable(err)
	}
	return resp, nil
}

func (c *Client) newRequest(ctx context.Context, method string, body io.Reader) (*http.Request, error) {
	req := &http.Request{
		Method:     method,
		URL:        c.url,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header, 8),
		Host:       c.url.Host,
	}
	req = req.WithContext(ctx)
	switch b := body.(type) {
	case nil:
	case *bytes.Reader:
		req.ContentLength = int64(b.Len())
		req.Body = io.NopCloser(b)
		snapshot := *b
		req.GetBody = func() (io.ReadCloser, error) { r := snapshot; return io.NopCloser(&r), nil }
		if req.ContentLength == 0 {
			req.Body = http.NoBody
			req.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
		}
	default:
		req.Body = io.NopCloser(body)
		req.ContentLength = -1
	}
	return req, nil
}
