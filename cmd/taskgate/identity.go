package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/gateway"
)

// identityFlags say what the gateway is called by outside: the public URL
// OAuth clients ask tokens for, and which proxies may say it.
func identityFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "public-url", EnvVars: env("public-url"), Category: catIdentity,
			Usage: "the gateway's external MCP `URL` (https://mcp.example.com/mcp) when it runs behind TLS termination or an ingress: the resource OAuth clients ask tokens for, and the base of its metadata URL (default: each request's Host and TLS, with --trusted-proxies' forwarding headers)"},
		&cli.StringSliceFlag{Name: "trusted-proxies", EnvVars: env("trusted-proxies"), Category: catIdentity,
			Usage: "`CIDR`s or addresses of the proxies whose Forwarded, X-Forwarded-Proto and X-Forwarded-Host headers say what URL the client reached, when --public-url is unset (repeatable, or comma-separated)"},
	}
}

// publicIdentity reads --public-url and --trusted-proxies.
func publicIdentity(c *cli.Context) (publicURL string, proxies []netip.Prefix, err error) {
	if publicURL = c.String("public-url"); publicURL != "" {
		if _, err := gateway.ParsePublicURL(publicURL); err != nil {
			return "", nil, fmt.Errorf("invalid --public-url %v", err)
		}
	}
	proxies, err = parseProxies(c.StringSlice("trusted-proxies"))
	return publicURL, proxies, err
}

// parseProxies reads CIDRs ("10.0.0.0/8") and bare addresses (one host).
func parseProxies(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, p.Masked())
				continue
			}
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("invalid --trusted-proxies %q: want a CIDR such as 10.0.0.0/8 or an address such as 10.0.0.1", s)
			}
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out, nil
}
