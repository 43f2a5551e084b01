package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxDocument bounds what is read of a metadata, key set or introspection
// answer: real ones are a few KiB.
const maxDocument = 1 << 20

// DefaultHTTPTimeout bounds one call to the authorization server when
// Config.HTTPClient is nil.
const DefaultHTTPTimeout = 5 * time.Second

// errNotFound: the document is not there (404), so discovery tries the
// next well-known location.
var errNotFound = errors.New("not found")

// getJSON GETs u and decodes its JSON answer into out. A network error or
// a 5xx is the server being unavailable; another non-200 status is an
// error of its own (errNotFound for 404).
func getJSON(ctx context.Context, c *http.Client, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	return doJSON(c, req, out)
}

func doJSON(c *http.Client, req *http.Request, out any) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", req.URL.Redacted(), err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %w", req.URL.Redacted(), errNotFound)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s answered HTTP %d", req.URL.Redacted(), resp.StatusCode)
	case len(body) > maxDocument:
		return fmt.Errorf("%s: answer over %d bytes", req.URL.Redacted(), maxDocument)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s: not the JSON expected: %w", req.URL.Redacted(), err)
	}
	return nil
}

// serverMetadata is what an authorization server's metadata says that the
// gateway uses (RFC 8414 §2; OpenID Connect Discovery 1.0 §3).
type serverMetadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// metadataURLs are where issuer's metadata may be, in the order MCP
// 2025-11-25 (Authorization, "Authorization Server Metadata Discovery")
// has clients try them: RFC 8414 §3.1 (the well-known suffix inserted
// before the issuer's path), OpenID Connect with path insertion, then
// OpenID Connect Discovery 1.0 §4 (appended to the issuer).
func metadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("auth: issuer %q is not an http(s) URL without query or fragment (RFC 8414 §2)", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}, nil
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		origin + path + "/.well-known/openid-configuration",
	}, nil
}

// discover fetches issuer's metadata from the first well-known location
// that has it, and checks that it is issuer's own (RFC 8414 §3.3).
func discover(ctx context.Context, c *http.Client, issuer string) (serverMetadata, error) {
	urls, err := metadataURLs(issuer)
	if err != nil {
		return serverMetadata{}, err
	}
	var last error
	for _, u := range urls {
		var m serverMetadata
		err := getJSON(ctx, c, u, &m)
		if errors.Is(err, errNotFound) {
			last = err
			continue
		}
		if err != nil {
			return m, err
		}
		if m.Issuer != issuer {
			return m, fmt.Errorf("auth: the metadata at %s names issuer %q, not %q (RFC 8414 §3.3)", u, m.Issuer, issuer)
		}
		return m, nil
	}
	return serverMetadata{}, fmt.Errorf("auth: no authorization server metadata for %s: %w", issuer, last)
}
