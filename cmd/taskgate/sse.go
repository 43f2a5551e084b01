package main

// An upstream on the HTTP+SSE transport of MCP 2024-11-05: detected at
// start, fronted by the sse bridge (upstream/sse).

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/upstream/sse"
)

// upstreamTransportFlag chooses how --upstream is reached (serve and tools).
func upstreamTransportFlag() cli.Flag {
	return &cli.StringFlag{Name: "upstream-transport", Value: "auto", Category: catUpstream, EnvVars: env("upstream-transport"),
		Usage: "`MODE` of reaching --upstream: auto (POST initialize, and on 400, 404 or 405 try the HTTP+SSE transport, as MCP 2025-03-26 says), streamable-http, or sse (the 2024-11-05 HTTP+SSE transport: GET the URL, POST where its endpoint event says)"}
}

// parseTransport checks --upstream-transport: "" (auto), streamable-http
// or sse.
func parseTransport(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return "", nil
	case sse.StreamableHTTP:
		return sse.StreamableHTTP, nil
	case sse.SSE:
		return sse.SSE, nil
	}
	return "", fmt.Errorf("invalid --upstream-transport %q: want auto, streamable-http or sse", s)
}

// upstreamTransport is the transport of --upstream url: the one forced by
// --upstream-transport (sse checked with a GET), else the one detection
// finds. An upstream that
// cannot be reached, or answers neither way, is taken as Streamable HTTP
// (as before detection existed): the gateway starts, and its upstream
// check logs what is wrong.
func upstreamTransport(c *cli.Context, url string, opts upstream.Options, log zerolog.Logger) (string, error) {
	forced, err := parseTransport(c.String("upstream-transport"))
	if err != nil || forced == sse.StreamableHTTP {
		return forced, err
	}
	u, err := upstream.ParseURL(url)
	if err != nil {
		return "", fmt.Errorf("invalid --upstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()
	if forced == sse.SSE { // checked now: a wrong URL is a startup error, not every client's
		unreachable, err := sse.Probe(ctx, upstream.NewTransport(opts), u, probeHeader(opts, u.User))
		switch {
		case unreachable && upstream.FaultText(err) != "":
			log.Error().Err(err).Msg(upstream.FaultText(err))
		case unreachable:
			log.Warn().Err(err).Msg("the HTTP+SSE upstream is not reachable yet; its clients' sessions open once it is")
		case err != nil:
			return "", fmt.Errorf("--upstream-transport sse: %s is not an HTTP+SSE server's endpoint: %v", u.Redacted(), err)
		}
		return sse.SSE, nil
	}
	d, err := sse.Detect(ctx, upstream.NewTransport(opts), u, probeHeader(opts, u.User))
	switch {
	case err != nil && upstream.FaultText(err) != "":
		// Not "not reachable yet": the operator must act (a CA, the address).
		log.Warn().Err(err).Msg(upstream.FaultText(err) + "; Streamable HTTP assumed until then")
		return sse.StreamableHTTP, nil
	case err != nil:
		log.Warn().Err(err).Msg("cannot tell the upstream's transport (it is not reachable yet): Streamable HTTP assumed; give --upstream-transport sse for an HTTP+SSE server")
		return sse.StreamableHTTP, nil
	case d.Transport == "":
		log.Warn().Str("probes", d.Why).Msg("the upstream answered neither as a Streamable HTTP nor as an HTTP+SSE server: Streamable HTTP assumed")
		return sse.StreamableHTTP, nil
	}
	log.Info().Str("transport", d.Transport).Str("probes", d.Why).Msg("upstream transport detected")
	return d.Transport, nil
}

// probeHeader is what the detection probes send: the operator's headers
// and the URL's credentials, as the upstream client sends them.
func probeHeader(opts upstream.Options, user *url.Userinfo) http.Header {
	h := opts.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if user != nil && h.Get("Authorization") == "" {
		pass, _ := user.Password()
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user.Username()+":"+pass)))
	}
	return h
}

// openSSE fronts the HTTP+SSE server at url with the sse bridge.
func openSSE(c *cli.Context, url string, opts upstream.Options, log zerolog.Logger) (*openedUpstream, error) {
	lim, err := readBridgeLimits(c)
	if err != nil {
		return nil, err
	}
	bopts := sse.Options{URL: url, Transport: upstream.NewTransport(opts), MaxMessage: lim.maxMessage, Logger: log,
		MaxSessions: lim.maxSessions, SessionIdle: lim.sessionIdle, MaxSessionsPerPrincipal: lim.perPrincipal} // MaxSessions 0: the bridge's default, a session costs no process
	br, err := sse.New(bopts)
	if err != nil {
		return nil, fmt.Errorf("invalid --upstream: %v", err)
	}
	opts.Transport = br.Transport()
	up, err := upstream.New(url, opts)
	if err != nil {
		_ = br.Close(context.Background())
		return nil, fmt.Errorf("invalid --upstream: %v", err)
	}
	return &openedUpstream{Client: up, sse: br, name: up.URL() + " (HTTP+SSE)"}, nil
}
