package identity

// The gateway's public URL: what clients call it by, which is what OAuth
// names it by (the protected resource of RFC 9728, the audience of
// RFC 8707), and which may differ from the address it listens on behind
// TLS termination or an ingress.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// wellKnownResource is the well-known path of the protected resource
// metadata (RFC 9728 §3).
const wellKnownResource = "/.well-known/oauth-protected-resource"

// PublicURLs derives the gateway's public URLs for a request: from
// gateway.Config.PublicURL when set, else from the request itself,
// trusting the forwarding headers of gateway.Config.TrustedProxies only.
type PublicURLs struct {
	fixed   *url.URL       // Config.PublicURL; nil: from each request
	path    string         // the MCP endpoint's path (Config.Path), without a fixed URL
	trusted []netip.Prefix // Config.TrustedProxies
}

// NewPublicURLs returns the public URLs of Config.PublicURL (public) or,
// when it is empty, of each request.
func NewPublicURLs(public string, path string, trusted []netip.Prefix) (*PublicURLs, error) {
	p := &PublicURLs{path: path, trusted: trusted}
	if public == "" {
		return p, nil
	}
	u, err := ParsePublicURL(public)
	if err != nil {
		return nil, fmt.Errorf("gateway: Config.PublicURL: %w", err)
	}
	if u.Path == "" || u.Path == "/" { // an origin alone, as --auth-audience's default reads it too
		u.Path, u.RawPath = path, ""
	}
	p.fixed = u
	return p, nil
}

// ParsePublicURL checks a public URL (gateway.Config.PublicURL): an absolute
// http(s) URL with a host, and no user, query or fragment (it identifies
// a resource: RFC 8707 §2 forbids a fragment, and a query would not
// survive the path insertion of RFC 9728 §3.1).
func ParsePublicURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q: %w", raw, errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: the scheme must be http or https", raw)
	case u.Host == "" || u.Opaque != "":
		return nil, fmt.Errorf("%q: it needs a host", raw)
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("%q: no user, query or fragment allowed", raw)
	}
	u.Host = strings.ToLower(u.Host)
	return u, nil
}

// origin is the scheme and host clients reach the gateway at for r:
// "https://gw.example".
func (p *PublicURLs) origin(r *http.Request) string {
	if p.fixed != nil {
		return p.fixed.Scheme + "://" + p.fixed.Host
	}
	if o, ok := r.Context().Value(publicOriginKey{}).(string); ok {
		return o
	}
	scheme, host := p.fromRequest(r)
	return scheme + "://" + host
}

type publicOriginKey struct{}

// Resolve returns r carrying the origin a trusted proxy's forwarding
// headers name, read before the front door drops those headers (they
// must not reach the upstream as the gateway's word); r itself when no
// trusted proxy sent it.
func (p *PublicURLs) Resolve(r *http.Request) *http.Request {
	if p.fixed != nil || !p.fromTrusted(r.RemoteAddr) {
		return r
	}
	scheme, host := p.fromRequest(r)
	return r.WithContext(context.WithValue(r.Context(), publicOriginKey{}, scheme+"://"+host))
}

// mcpPath is the path of the MCP endpoint as clients see it.
func (p *PublicURLs) mcpPath() string {
	if p.fixed != nil {
		return p.fixed.EscapedPath()
	}
	return p.path
}

// MCPURL is the gateway's public MCP URL: the protected resource's
// identifier.
func (p *PublicURLs) MCPURL(r *http.Request) string {
	return p.origin(r) + p.mcpPath()
}

// MetadataURL is where the gateway's protected resource metadata is, by
// RFC 9728 §3.1: the well-known path inserted between the host and the
// resource's path.
func (p *PublicURLs) MetadataURL(r *http.Request) string {
	path := p.mcpPath()
	if path == "/" {
		path = ""
	}
	return p.origin(r) + wellKnownResource + path
}

// fromRequest is the scheme and host r reached: from the forwarding
// headers when the connection comes from a trusted proxy, else r's TLS and
// Host.
func (p *PublicURLs) fromRequest(r *http.Request) (scheme, host string) {
	scheme, host = "http", strings.ToLower(r.Host)
	if r.TLS != nil {
		scheme = "https"
	}
	if !validHost(host) {
		host = "localhost" // only an HTTP/1.0 request can lack a Host
	}
	if !p.fromTrusted(r.RemoteAddr) {
		return scheme, host
	}
	fproto, fhost, found := forwarded(r.Header.Values("Forwarded"), p.isTrusted)
	if !found {
		fproto = lastValue(r.Header.Values("X-Forwarded-Proto"))
		fhost = lastValue(r.Header.Values("X-Forwarded-Host"))
	}
	if fproto = strings.ToLower(fproto); fproto == "http" || fproto == "https" {
		scheme = fproto
	}
	if fhost = strings.ToLower(fhost); validHost(fhost) {
		host = fhost
	}
	return scheme, host
}

// fromTrusted reports whether the connection's peer (RemoteAddr) is a
// trusted proxy.
func (p *PublicURLs) fromTrusted(remote string) bool {
	if len(p.trusted) == 0 {
		return false
	}
	host := remote
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return p.isTrusted(ap.Addr())
	}
	a, err := netip.ParseAddr(host)
	return err == nil && p.isTrusted(a)
}

// isTrusted reports whether a is in a trusted proxy's range.
func (p *PublicURLs) isTrusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, pf := range p.trusted {
		if pf.Contains(a) {
			return true
		}
	}
	return false
}

// DropForwarding deletes from h a client's own claims about addresses
// (Forwarded, X-Forwarded-*, X-Real-Ip): they are not a proxy's, and
// must not reach the upstream as if one had said them. The front door
// (gateway/frontdoor.go) and the discovery pass-through (oauthmeta.go)
// drop them; they are the headers fromRequest reads of a trusted proxy.
func DropForwarding(h http.Header) {
	for _, k := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"} {
		delete(h, k)
	}
}

// lastValue is the last of the comma-separated values of a header: the
// one the nearest proxy (the trusted peer) added. An earlier one may be
// the client's own, passed on by a proxy that appends.
func lastValue(values []string) string {
	if len(values) == 0 {
		return ""
	}
	v := values[len(values)-1]
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return strings.TrimSpace(v)
}

// forwarded picks proto and host from Forwarded header values (RFC 7239):
// walking from the last element (added by the trusted peer) towards the
// client while the element's "for" is a trusted proxy too, it takes the
// outermost element a trusted proxy wrote. found is false when there is no
// element, or it names neither proto nor host; a malformed header counts
// as none.
func forwarded(values []string, trusted func(netip.Addr) bool) (proto, host string, found bool) {
	elems, ok := parseForwarded(values)
	if !ok || len(elems) == 0 {
		return "", "", false
	}
	i := len(elems) - 1
	for i > 0 {
		a, ok := forwardedAddr(elems[i]["for"])
		if !ok || !trusted(a) {
			break
		}
		i--
	}
	e := elems[i]
	proto, host = e["proto"], e["host"]
	return proto, host, proto != "" || host != ""
}

// maxForwarded bounds the elements of the Forwarded headers read.
const maxForwarded = 32

// parseForwarded parses Forwarded header values (RFC 7239 §4): elements
// separated by commas, each of pairs token=value separated by semicolons,
// a value a token or a quoted-string. Parameter names are
// case-insensitive. ok is false when the syntax is wrong or there are more
// than maxForwarded elements.
func parseForwarded(values []string) (elems []map[string]string, ok bool) {
	for _, v := range values {
		s := v
		for {
			elem := map[string]string{}
			for {
				s = strings.TrimLeft(s, " \t")
				if len(elem) == 0 && (s == "" || s[0] == ',') {
					break // an empty list member ("a, ,b"; RFC 9110 §5.6.1)
				}
				eq := strings.IndexByte(s, '=')
				if eq <= 0 {
					return nil, false
				}
				name := strings.ToLower(strings.TrimSpace(s[:eq]))
				if !isToken(name, "") {
					return nil, false
				}
				s = s[eq+1:]
				var val string
				if strings.HasPrefix(s, `"`) {
					var rest string
					val, rest, ok = unquote(s)
					if !ok {
						return nil, false
					}
					s = rest
				} else {
					end := strings.IndexAny(s, ";,")
					if end < 0 {
						end = len(s)
					}
					val = strings.TrimRight(s[:end], " \t")
					// RFC 7239 §6 wants node names with ':' or '[' quoted,
					// but proxies send them bare too.
					if !isToken(val, ":[]") {
						return nil, false
					}
					s = s[end:]
				}
				if _, dup := elem[name]; dup {
					return nil, false // RFC 7239 §4: each parameter at most once per element
				}
				elem[name] = val
				s = strings.TrimLeft(s, " \t")
				if !strings.HasPrefix(s, ";") {
					break
				}
				s = s[1:]
			}
			if len(elem) > 0 {
				if elems = append(elems, elem); len(elems) > maxForwarded {
					return nil, false
				}
			}
			s = strings.TrimLeft(s, " \t")
			if s == "" {
				break
			}
			if s[0] != ',' {
				return nil, false
			}
			s = s[1:]
		}
	}
	return elems, true
}

// unquote reads the quoted-string at the start of s (RFC 9110 §5.6.4) and
// returns its value and what follows it.
func unquote(s string) (val, rest string, ok bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return b.String(), s[i+1:], true
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == '\t' || c >= 0x20 && c != 0x7f:
			b.WriteByte(c)
		default:
			return "", "", false
		}
	}
	return "", "", false
}

// isToken reports whether s is a non-empty token (RFC 9110 §5.6.2), with
// the bytes of extra allowed too.
func isToken(s, extra string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return true
}

// forwardedAddr is the IP address of a Forwarded "for" node (RFC 7239
// §6): an IPv4 address or a bracketed IPv6 one, with or without a port.
// "unknown" and obfuscated identifiers are not addresses.
func forwardedAddr(node string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(node); err == nil {
		return ap.Addr().Unmap(), true
	}
	node = strings.TrimSuffix(strings.TrimPrefix(node, "["), "]")
	a, err := netip.ParseAddr(node)
	return a.Unmap(), err == nil
}

// validHost reports whether host is a host[:port] fit for a URL: letters,
// digits and the punctuation of names and IP addresses, nothing that would
// change the URL's meaning.
func validHost(host string) bool {
	if host == "" || len(host) > 255 {
		return false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-._:[]", c) >= 0) {
			return false
		}
	}
	u, err := url.Parse("http://" + host)
	return err == nil && u.Host == host && u.Hostname() != ""
}
