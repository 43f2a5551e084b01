package main

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/gateway"
)

// authFlags make the gateway an OAuth 2.1 resource server (opt-in): it
// checks the bearer token of every request itself.
func authFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "auth-issuer", EnvVars: env("auth-issuer"), Category: catIdentity,
			Usage: "validate tokens: accept JWT access tokens of this authorization server `URL`, verified against the keys its metadata names (RFC 8414 or OpenID Connect discovery); it is also the authorization server of the gateway's own metadata"},
		&cli.StringSliceFlag{Name: "auth-audience", EnvVars: env("auth-audience"), Category: catIdentity, DefaultText: "--public-url, else http(s)://--listen/--path",
			Usage: "`URI`s a token's aud must name one of (RFC 8707: clients ask tokens for the gateway's public MCP URL); repeatable or comma-separated"},
		&cli.StringFlag{Name: "auth-introspection-url", EnvVars: env("auth-introspection-url"), Category: catIdentity,
			Usage: "validate tokens: check every token with this RFC 7662 introspection endpoint `URL` (opaque tokens), instead of as a JWT"},
		&cli.Float64Flag{Name: "auth-introspection-rate", Value: auth.DefaultIntrospectionRate, EnvVars: env("auth-introspection-rate"), Category: catIdentity,
			Usage: "introspection calls per second one client address (an IPv6 /64) may cause with tokens not cached, a burst of 4 s' worth; past it 429 with Retry-After. Behind a proxy every client is the proxy's address: raise it, or 0 for no limit"},
		&cli.StringFlag{Name: "auth-client-id", EnvVars: env("auth-client-id"), Category: catIdentity,
			Usage: "client `ID` the gateway authenticates to the introspection endpoint with (HTTP Basic)"},
		&cli.StringFlag{Name: "auth-client-secret", EnvVars: env("auth-client-secret"), Category: catIdentity,
			Usage: "`SECRET` of --auth-client-id; prefer the environment variable, which stays out of the process list"},
		&cli.StringSliceFlag{Name: "auth-required-scopes", EnvVars: env("auth-required-scopes"), Category: catIdentity,
			Usage: "`SCOPE`s every token must grant, else HTTP 403 insufficient_scope; repeatable or comma-separated (also the scopes_supported of the gateway's metadata)"},
		&cli.BoolFlag{Name: "auth-forward", Value: true, EnvVars: env("auth-forward"), Category: catIdentity,
			Usage: "forward the client's Authorization to the upstream after validating it; false strips it, for an upstream that trusts the gateway"},
	}
}

// authenticator builds the gateway's token check from the flags: nil
// (and no error) when neither --auth-issuer nor --auth-introspection-url
// is set. publicURL is --public-url; scheme, listen and path say where
// the gateway serves, for the default audience.
func authenticator(c *cli.Context, publicURL, scheme, listen, path string, log zerolog.Logger) (gateway.Authenticator, error) {
	issuer, introspect := c.String("auth-issuer"), c.String("auth-introspection-url")
	if issuer == "" && introspect == "" {
		for _, name := range []string{"auth-audience", "auth-client-id", "auth-client-secret", "auth-required-scopes", "auth-forward", "auth-introspection-rate"} {
			if c.IsSet(name) {
				return nil, fmt.Errorf("--%s needs --auth-issuer or --auth-introspection-url (the gateway validates no token without one)", name)
			}
		}
		return nil, nil
	}
	if introspect == "" && (c.IsSet("auth-client-id") || c.IsSet("auth-client-secret")) {
		return nil, fmt.Errorf("--auth-client-id and --auth-client-secret authenticate to --auth-introspection-url, which is not set")
	}
	rate := c.Float64("auth-introspection-rate")
	switch {
	case introspect == "" && c.IsSet("auth-introspection-rate"):
		return nil, fmt.Errorf("--auth-introspection-rate limits calls to --auth-introspection-url, which is not set")
	case rate < 0:
		return nil, fmt.Errorf("invalid --auth-introspection-rate %v: calls per second, 0 for no limit", rate)
	case rate == 0:
		rate = -1 // auth.Config: negative is no limit
	}
	audience := splitList(c.StringSlice("auth-audience"))
	if len(audience) == 0 {
		aud, err := defaultAudience(publicURL, scheme, listen, path)
		if err != nil {
			return nil, err
		}
		audience = []string{aud}
	}
	g, err := auth.New(auth.Config{
		Issuer: issuer, Audience: audience,
		IntrospectionURL: introspect, ClientID: c.String("auth-client-id"), ClientSecret: c.String("auth-client-secret"),
		IntrospectionRate: rate,
		RequiredScopes:    splitList(c.StringSlice("auth-required-scopes")),
	})
	if err != nil {
		return nil, fmt.Errorf("invalid --auth-* flags: %v", err)
	}
	mode := "jwt"
	if introspect != "" {
		mode = "introspection"
		if issuer == "" {
			log.Info().Str("op", "auth").Msg("--auth-introspection-url without --auth-issuer: the gateway's metadata names the authorization servers of the upstream's own metadata (RFC 9728); an upstream without one leaves clients nowhere to sign in")
		}
	}
	log.Info().Str("op", "auth").Str("issuer", issuer).Str("introspection", introspect).Strs("audience", audience).
		Str("mode", mode).Bool("forward", c.Bool("auth-forward")).Msg("validating bearer tokens")
	return g, nil
}

// defaultAudience is the gateway's MCP URL: --public-url (with --path
// when it has none), else the --listen address. It is never taken from
// a request's Host: a token minted for another server must not pass
// because its client named that server in Host.
func defaultAudience(publicURL, scheme, listen, path string) (string, error) {
	if publicURL != "" {
		u, err := url.Parse(publicURL)
		if err != nil {
			return "", fmt.Errorf("invalid --public-url: %v", err)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = path
		}
		return u.String(), nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" || net.ParseIP(host).IsUnspecified() {
		return "", fmt.Errorf("token validation needs the audience tokens are issued for: set --auth-audience or --public-url (--listen %s names no host clients reach)", listen)
	}
	return scheme + "://" + listen + path, nil
}

// splitList reads repeatable, comma-separated flag values.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// scheme is the scheme the gateway serves: https with --tls-cert.
func (d door) scheme() string {
	if d.certs != nil {
		return "https"
	}
	return "http"
}
