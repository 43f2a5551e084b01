package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
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
	// TLSConfig is used for https upstreams: the CA to trust, a client
	// certificate. Nil means Go's defaults.
	TLSConfig *tls.Config
	// Header is set on every request to the upstream, replacing a client's
	// header of the same name (an API key the upstream wants from the
	// gateway, say). Nil: none.
	Header http.Header
	// Ready, when set, is what Ping asks instead of dialing the upstream's
	// address (an upstream served in process, such as a stdio child).
	Ready func(context.Context) error
	// Name, when set, is what URL returns, so that errors and logs name the
	// upstream by it (a stdio child's command rather than the placeholder
	// URL its Transport serves).
	Name string
	// Tracer, when set, gives every request to the upstream a client span
	// and W3C trace context (headers, and params._meta on the requests
	// the client builds itself). Nil: no tracing, at no cost.
	Tracer trace.TracerProvider
}

// Observation describes one HTTP exchange with the upstream, for the
// function given to SetObserver.
type Observation struct {
	// Method is the MCP method sent ("response" for the answer to a
	// server→client request); for Forward, the one named with WithMethod,
	// else the HTTP method.
	Method string
	Took   time.Duration // until the response headers, or the failure
	Status int           // HTTP status; 0 when Err is set
	Err    error         // no response (the upstream is unreachable)
	// NotMCP, when set, says why the answer cannot be an MCP endpoint's
	// (notMCP): the upstream URL most likely names the wrong path.
	NotMCP string
}

type methodKey struct{}

// WithMethod names the MCP method of a request sent with Forward, for the
// observer.
func WithMethod(ctx context.Context, method string) context.Context {
	return context.WithValue(ctx, methodKey{}, method)
}

// Client talks to one upstream MCP endpoint. It is safe for concurrent use.
type Client struct {
	url    *url.URL
	header http.Header       // Options.Header
	basic  string            // "Basic …" from the URL's userinfo; "" without
	rt     http.RoundTripper // Forward's: own for a cleartext upstream, else the standard transport; or Options.Transport
	// own carries the client's own calls (post, CloseSession): a
	// connTransport, which holds a call without net/http's two goroutines
	// per connection; Options.Transport when one was given.
	own     http.RoundTripper
	observe atomic.Pointer[func(Observation)]
	ready   func(context.Context) error // Options.Ready
	name    string                      // Options.Name
	tracer  trace.Tracer                // from Options.Tracer; nil: off
}

// SetObserver makes f hear of every HTTP exchange with the upstream once
// its response headers arrived or it failed (metrics); nil stops it. f is
// not called when the caller's context ended first (a client that left is
// not an upstream failure). It must be quick and safe for concurrent use.
func (c *Client) SetObserver(f func(Observation)) {
	if f == nil {
		c.observe.Store(nil)
		return
	}
	c.observe.Store(&f)
}

// New returns a client of the MCP endpoint at rawURL (http or https).
func New(rawURL string, opts Options) (*Client, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	rt, own := opts.Transport, opts.Transport
	if rt == nil {
		rt = NewTransport(opts)
		own = newConnTransport(opts, rt)
		if u.Scheme == "http" {
			// Relayed requests too: cleartext HTTP/1.1 either way, and
			// connTransport writes and reads on the caller's goroutine,
			// where net/http's transport hands each request to two
			// goroutines of its connection (about a tenth of the proxy's
			// CPU per pass-through call). Over TLS the standard transport
			// stays, for HTTP/2.
			rt = own
		}
	}
	c := &Client{url: u, rt: rt, own: own, header: opts.Header.Clone(), ready: opts.Ready, name: opts.Name}
	if opts.Tracer != nil {
		c.tracer = opts.Tracer.Tracer("github.com/taskgate/taskgate/upstream")
	}
	if u.User != nil {
		pass, _ := u.User.Password()
		c.basic = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass))
	}
	return c, nil
}

// ParseURL checks that rawURL names an http(s) endpoint with a host.
func ParseURL(rawURL string) (*url.URL, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("upstream URL is empty")
	}
	if !strings.Contains(rawURL, "://") {
		// "127.0.0.1:3000/mcp" does not parse, and "localhost:3000/mcp"
		// parses with the scheme "localhost": name the fix for both.
		fixed := RedactURL("http://" + rawURL)
		return nil, fmt.Errorf("upstream URL %q has no scheme: did you mean %s?", strings.TrimPrefix(fixed, "http://"), fixed)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// url's error quotes the whole URL, password included.
		return nil, fmt.Errorf("upstream URL %q is not a URL", RedactURL(rawURL))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("upstream URL %q must start with http:// or https://", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("upstream URL %q has no host", u.Redacted())
	}
	return u, nil
}

// PathHint is the likely fix for an upstream URL whose answers are not an
// MCP endpoint's (Observation.NotMCP): "did you mean …/mcp?" when its path
// is empty or "/" (the path MCP servers commonly serve at), else a plea to
// check the path. The URL's password is masked.
func PathHint(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "check the upstream URL"
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/mcp"
		return "did you mean " + u.Redacted() + "?"
	}
	return "check the path of " + u.Redacted() + ": it must be the server's MCP endpoint (often /mcp)"
}

// RedactURL masks the userinfo of a URL that may not parse: whatever
// stands between "//" and the next "@" before the path.
func RedactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "//")
	if !ok {
		return raw
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		return scheme + "//xxxxx" + rest[at:]
	}
	return raw
}

// Defaults of Options, shared by both transports.
const (
	defaultDialTimeout = 10 * time.Second
	defaultIdleConns   = 1024
	idleConnTimeout    = 90 * time.Second
)

func (o Options) dialTimeout() time.Duration {
	if o.DialTimeout <= 0 {
		return defaultDialTimeout
	}
	return o.DialTimeout
}

func (o Options) maxIdlePerHost() int {
	if o.MaxIdleConnsPerHost <= 0 {
		return defaultIdleConns
	}
	return o.MaxIdleConnsPerHost
}

// NewTransport returns the pooled transport a Client uses by default.
// It never times out a response: MCP tool calls may run for many minutes.
func NewTransport(opts Options) *http.Transport {
	dial, perHost := opts.dialTimeout(), opts.maxIdlePerHost()
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          0, // no global cap; the per-host cap applies
		MaxIdleConnsPerHost:   perHost,
		IdleConnTimeout:       idleConnTimeout,
		TLSHandshakeTimeout:   dial,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       opts.TLSConfig,
		// Pass-through forwards the client's Accept-Encoding and the
		// upstream's encoded body untouched; our own calls ask for identity.
		DisableCompression: true,
		// Every connection keeps its buffers for life, and a relayed
		// stream (a client's GET, a long plain call) holds one for as long
		// as it lasts; the defaults are 4 KiB + 4 KiB. Bodies larger than
		// a buffer are read and written around it, so small buffers cost
		// little: a request whose headers and body exceed 2 KiB takes one
		// more write. (The gateway's own calls, held tasks among them, go
		// through connTransport, with no goroutines per connection.)
		ReadBufferSize:  1 << 10,
		WriteBufferSize: 2 << 10,
	}
}

// URL returns the upstream endpoint for display: logs and operator
// output. A password in it is masked (net/url's Redacted); requests use the
// real one. Options.Name, when set, is returned instead.
func (c *Client) URL() string {
	if c.name != "" {
		return c.name
	}
	return c.url.Redacted()
}

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
	c.setHeader(req.Header)
	name, _ := ctx.Value(methodKey{}).(string)
	if name == "" {
		name = method
	}
	if c.tracer == nil {
		return c.roundTrip(c.rt, req, name)
	}
	sctx, span := c.startSpan(ctx, name)
	req = req.WithContext(sctx)
	inject(sctx, req.Header)
	resp, err := c.roundTrip(c.rt, req, name)
	endSpan(span, resp, err)
	return resp, err
}

// Ping opens and closes a TCP connection to the upstream's host: it proves
// reachability without sending MCP traffic the upstream would have to
// answer. Its error is an *UnreachableError.
func (c *Client) Ping(ctx context.Context) error {
	if c.ready != nil {
		return c.ready(ctx)
	}
	host := c.url.Host
	if c.url.Port() == "" {
		port := "80"
		if c.url.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(c.url.Hostname(), port)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return c.unreachable(err)
	}
	return conn.Close()
}

// setHeader sets Options.Header on h, and the upstream URL's credentials
// as Basic authorization when the request carries none (as net/http's
// Client does; the gateway round-trips itself).
func (c *Client) setHeader(h http.Header) {
	for k, vv := range c.header {
		h[k] = vv
	}
	if c.basic != "" && h.Get("Authorization") == "" {
		h.Set("Authorization", c.basic)
	}
}

// roundTrip sends req with rt, tells the observer, and names an
// unreachable upstream in the error.
func (c *Client) roundTrip(rt http.RoundTripper, req *http.Request, method string) (*http.Response, error) {
	observe := c.observe.Load()
	var start time.Time
	if observe != nil {
		start = time.Now()
	}
	resp, err := rt.RoundTrip(req)
	return c.observed(observe, req, method, start, resp, err)
}

// observed is the end of roundTrip, once the response headers to req
// arrived or the exchange failed (started at start): observe, when set,
// hears of it, and an error names the unreachable upstream.
func (c *Client) observed(observe *func(Observation), req *http.Request, method string, start time.Time, resp *http.Response, err error) (*http.Response, error) {
	if observe == nil {
		if err != nil {
			return nil, c.unreachable(err)
		}
		return resp, nil
	}
	o := Observation{Method: method, Took: time.Since(start), Err: err}
	if resp != nil {
		o.Status = resp.StatusCode
		o.NotMCP = notMCP(req, resp)
	}
	if err != nil {
		err = c.unreachable(err)
	}
	if req.Context().Err() == nil {
		(*observe)(o)
	}
	return resp, err
}

// notMCP says why resp, the answer to req, cannot come from an MCP
// endpoint, or "" when it may. Only a POST tells: an MCP endpoint accepts
// POST (so no 405), answers 404 only to a session id it does not know
// (Streamable HTTP, "Session Management"), and answers a request with
// application/json or text/event-stream ("Sending Messages to the
// Server"; a 200 without a Content-Type may be an empty answer to a
// notification). A GET may get 405 from any MCP server, and a DELETE too.
func notMCP(req *http.Request, resp *http.Response) string {
	if req.Method != http.MethodPost {
		return ""
	}
	if (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed) && mediaType(resp) == "application/json" {
		// A JSON-RPC error with it (a 2026-07-28 server refusing a
		// method it removed answers 404 so): an MCP endpoint's answer.
		return ""
	}
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed:
		return "HTTP 405 to a POST"
	case resp.StatusCode == http.StatusNotFound && req.Header.Get("Mcp-Session-Id") == "":
		return "HTTP 404 to a POST without a session"
	case resp.StatusCode == http.StatusOK:
		switch ct := mediaType(resp); ct {
		case "application/json", "text/event-stream", "": // "": an empty answer to a notification
		default:
			return fmt.Sprintf("Content-Type %q in answer to a POST", ct)
		}
	}
	return ""
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
