package console

// What the console answers, before any page: a Host it serves (against
// DNS rebinding) and, for a request that changes something, an Origin
// that is its own (against cross-site request forgery).
//
// DNS rebinding: a page on rebind.attacker.example makes its own name
// resolve to 127.0.0.1 and then reads the console as its same origin; the
// one thing the browser cannot hide is the name, in Host (RFC 9110
// §7.2). So a Host that is not one of the console's own names is
// answered 421 Misdirected Request (RFC 9110 §15.5.20: this server is not
// authoritative for that URI), before the mux: no page, no static file,
// no login form, no event stream. The names served:
//
//   - localhost and IP literals (127.0.0.1, [::1], 10.0.0.5, …), on any
//     port. Rebinding needs a DNS name the attacker controls; a URL whose
//     host is an IP literal (or localhost, which browsers resolve
//     themselves, RFC 6761 §6.3) has nothing to rebind, and its origin is
//     the console's own. Any port, because an SSH tunnel, a container's
//     port mapping or a NAT put another port (and address) in the URL.
//   - the --console-listen host when it is a name, and every
//     --console-host NAME[:PORT]: the names the operator says are the
//     console's (NAME alone: any port).
//
// Origin: a request other than GET and HEAD must come from the console's
// own origin, whatever credential it carries (Fetch Standard: browsers
// send Origin on every request whose method is neither GET nor HEAD).

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// hostPolicy is the set of Host values the console serves.
type hostPolicy struct {
	// names maps a configured name (lower case) to its ports; an empty
	// set means any port.
	names map[string]map[string]bool
}

// errHostSyntax says what a --console-host entry must look like.
var errHostSyntax = errors.New("want NAME or NAME:PORT, a DNS name (letters, digits, '-', '_', dots) and a port 1-65535, no scheme or path")

// CheckHosts checks --console-host entries, so that a typo stops the
// start with a message rather than a console that refuses its operator.
func CheckHosts(hosts []string) error {
	_, err := newHostPolicy("", hosts)
	return err
}

// newHostPolicy builds the policy of Config.Listen and Config.Hosts.
func newHostPolicy(listen string, hosts []string) (*hostPolicy, error) {
	p := &hostPolicy{names: map[string]map[string]bool{}}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		name, port, ok := splitHost(h)
		switch {
		case ok && (name == "localhost" || isIPLiteral(name)):
			continue // served anyway
		case !ok || !isName(name):
			return nil, fmt.Errorf("invalid --console-host %q: %w", h, errHostSyntax)
		}
		p.add(name, port)
	}
	if name, _, err := net.SplitHostPort(listen); err == nil && isName(name) && !strings.EqualFold(name, "localhost") {
		p.add(strings.ToLower(name), "") // its port may be 0: any
	}
	return p, nil
}

func (p *hostPolicy) add(name, port string) {
	ports, seen := p.names[name]
	switch {
	case seen && len(ports) == 0: // any port already
	case port == "":
		p.names[name] = map[string]bool{}
	default:
		if ports == nil {
			ports = map[string]bool{}
			p.names[name] = ports
		}
		ports[port] = true
	}
}

// serves says whether the console answers a request with this Host.
func (p *hostPolicy) serves(host string) bool {
	name, port, ok := splitHost(host)
	if !ok {
		return false
	}
	if name == "localhost" || isIPLiteral(name) {
		return true
	}
	return p.configured(name, port)
}

// configured says whether name:port is a configured name. A Host without
// a port is the scheme's default, which browsers leave out: 80 or 443.
func (p *hostPolicy) configured(name, port string) bool {
	ports, ok := p.names[name]
	switch {
	case !ok:
		return false
	case len(ports) == 0:
		return true
	case port == "":
		return ports["80"] || ports["443"]
	}
	return ports[port]
}

// splitHost splits a Host value (RFC 9110 §7.2: uri-host [ ":" port ])
// into its lower-case name and its port; ok is false for anything else.
// Brackets hold an IPv6 address (RFC 3986 §3.2.2), kept out of name.
func splitHost(host string) (name, port string, ok bool) {
	rest := ""
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "", "", false
		}
		name, rest = host[1:end], host[end+1:]
		if a, err := netip.ParseAddr(name); err != nil || !a.Is6() || a.Zone() != "" {
			return "", "", false
		}
	} else if i := strings.IndexByte(host, ':'); i >= 0 {
		name, rest = host[:i], host[i:]
	} else {
		name = host
	}
	if rest != "" {
		if rest[0] != ':' || !validPort(rest[1:]) {
			return "", "", false
		}
		port = rest[1:]
	}
	if name == "" {
		return "", "", false
	}
	return strings.ToLower(name), port, true
}

func validPort(s string) bool {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return false
	}
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535
}

// isIPLiteral says whether name (from splitHost) is an IP address as a
// browser writes it: dotted-decimal IPv4, or IPv6 (which splitHost took
// out of its brackets; no zone).
func isIPLiteral(name string) bool {
	a, err := netip.ParseAddr(name)
	return err == nil && a.Zone() == "" && (a.Is4() || a.Is6() && strings.Contains(name, ":"))
}

// isName says whether s is a DNS name (RFC 1123 §2.1 labels; '_' too,
// as container names have it), not an IP address.
func isName(s string) bool {
	if s == "" || len(s) > 253 || strings.HasSuffix(s, ".") {
		return false
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// misdirected answers a request whose Host the console does not serve.
func misdirected(w http.ResponseWriter, host string) {
	http.Error(w, fmt.Sprintf("taskgate console: not served as %q. It answers localhost, IP addresses and the --console-listen host; "+
		"give the name it is reached by with --console-host (TASKGATE_CONSOLE_HOST). A name it was not given is refused "+
		"against DNS rebinding.", host), http.StatusMisdirectedRequest)
}

// originOf is the origin of a header's URL (Origin, or Referer) as
// scheme and a host with the scheme's default port left out; ok is false
// for "null" and anything not http(s).
func originOf(raw string) (scheme, host string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", "", false
	}
	return u.Scheme, withoutDefaultPort(u.Scheme, strings.ToLower(u.Host)), true
}

func withoutDefaultPort(scheme, host string) string {
	if scheme == "http" {
		return strings.TrimSuffix(host, ":80")
	}
	return strings.TrimSuffix(host, ":443")
}

// sameOrigin says whether a request that changes something comes from
// the console's own origin, and why not. The origin is the scheme and the
// Host it was served as: http, or https, since a proxy in front may end
// TLS and the console cannot tell (it trusts no X-Forwarded-Proto), or
// https only over the console's own TLS. A configured name is the
// console's too (a proxy that rewrites Host). Origin, else Referer;
// neither is a client that is no browser (browsers send Origin on every
// such request), which only a Bearer token lets in.
func (c *Console) sameOrigin(r *http.Request) (bool, string) {
	src, which := r.Header.Get("Origin"), "Origin"
	if src == "" {
		src, which = r.Header.Get("Referer"), "Referer"
	}
	if src == "" {
		if c.how(r) == "bearer" {
			return true, ""
		}
		return false, "a request that changes something needs an Origin (or Referer) of this console, or Authorization: Bearer"
	}
	scheme, host, ok := originOf(src)
	if ok && (r.TLS == nil || scheme == "https") {
		if host == withoutDefaultPort(scheme, strings.ToLower(r.Host)) {
			return true, ""
		}
		if name, port, ok := splitHost(host); ok && c.hosts.configured(name, port) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("%s %q is not this console's origin (the Host it is served as, or a --console-host)", which, src)
}

// guard answers (and reports false) a request to a Host the console does
// not serve, or one that changes something from another origin.
func (c *Console) guard(w http.ResponseWriter, r *http.Request) bool {
	if !c.hosts.serves(r.Host) {
		c.refusals.Warn().Str("op", "console_host").Str("host", r.Host).Str("remote", r.RemoteAddr).Msg("console request to a host it does not serve refused")
		misdirected(w, r.Host)
		return false
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	if ok, why := c.sameOrigin(r); !ok {
		c.refusals.Warn().Str("op", "console_origin").Str("origin", r.Header.Get("Origin")).Str("remote", r.RemoteAddr).Msg("console request from another origin refused")
		http.Error(w, "taskgate console: cross-origin request refused: "+why, http.StatusForbidden)
		return false
	}
	return true
}
