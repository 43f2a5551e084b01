package identity

// OAuth discovery through the gateway (MCP 2025-06-18 and later,
// Authorization). Without validation of its own the upstream stays the
// resource server, and a client must still find out, from the gateway's
// URL, where to sign in: the gateway serves the upstream's protected
// resource metadata (RFC 9728) with the gateway's public URL as the
// resource, points the upstream's challenges at it, and passes through
// the authorization server metadata (RFC 8414, OpenID Connect Discovery)
// and the endpoints it names when the upstream is its own authorization
// server (the 2025-03-26 revision's default). With validation on, the
// gateway is the resource server and serves its own document, naming the
// upstream's authorization servers when it is configured with no issuer
// (introspection alone), whose metadata and endpoints then pass through
// too. Nothing of the operator's --upstream-header goes with any of it
// (upstream.Client.ForwardPath).

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/upstream"
)

// The well-known paths of authorization server metadata: RFC 8414 §3 and
// OpenID Connect Discovery 1.0 §4.
const (
	wellKnownServer = "/.well-known/oauth-authorization-server"
	wellKnownOIDC   = "/.well-known/openid-configuration"
)

// Bounds of the metadata cache.
const (
	discoveryTTL     = 5 * time.Minute  // how long an upstream document is reused
	discoveryMissTTL = 30 * time.Second // how long an upstream's 4xx is
	discoveryEntries = 64               // documents kept at once
	maxMetadataBytes = 256 << 10        // the largest document read
)

// errMetadata is an upstream document the gateway cannot use.
var errMetadata = errors.New("the upstream's OAuth metadata is not a JSON object")

// ownMetadata is the gateway's own token validation, as its protected
// resource metadata names it (auth.Guard).
type ownMetadata interface{ Metadata() auth.Metadata }

// OAuthMeta serves the well-known documents and endpoints of OAuth
// discovery on the gateway's origin. Safe for concurrent use.
type OAuthMeta struct {
	up      *upstream.Client
	pub     *PublicURLs
	upURL   *url.URL    // the upstream's MCP endpoint, without credentials
	own     ownMetadata // nil: the upstream is the resource server
	path    string      // Config.Path
	maxBody int64
	log     zerolog.Logger
	now     func() time.Time

	mu   sync.Mutex
	docs map[string]*upstreamDoc // by the upstream path it came from
}

// upstreamDoc is one metadata document of the upstream (or its answer
// when it had none), as it sent it.
type upstreamDoc struct {
	status    int            // the upstream's: 200, or a 4xx
	doc       map[string]any // with 200
	endpoints []string       // the paths on the upstream's origin it names (server metadata)
	expires   time.Time
}

// NewOAuthMeta returns the discovery of the gateway in front of up, at
// path (gateway.Config.Path), with own its token validation (nil: the
// upstream is the resource server), reading at most maxBody of an
// endpoint's request body.
func NewOAuthMeta(up *upstream.Client, pub *PublicURLs, own Authenticator, path string, maxBody int64, log zerolog.Logger) *OAuthMeta {
	d := &OAuthMeta{up: up, pub: pub, own: own, path: path, maxBody: maxBody, log: log, now: time.Now,
		docs: map[string]*upstreamDoc{}}
	// A stdio child (its bridge's host is under .invalid, RFC 6761 §6.4)
	// has no origin to discover anything on.
	if u := up.Endpoint(); !strings.HasSuffix(u.Hostname(), ".invalid") {
		d.upURL = u
	}
	return d
}

// Serve answers r when it is a discovery request, and reports whether it
// was. Only the documents the RFCs define are passed through: protected
// resource metadata (RFC 9728 §3.1) and authorization server metadata
// (RFC 8414 §3.1) at the root and with a path inserted, and OpenID
// Connect discovery where MCP clients look for it: inserted like RFC
// 8414's, or appended to an issuer's path (OpenID Connect Discovery 1.0
// §4.1) for an issuer the upstream's metadata names. No other path of
// the upstream's origin is reached through "/.well-known/" (an admin
// page at "/internal/.well-known/openid-configuration", say).
func (d *OAuthMeta) Serve(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	if p != path.Clean(p) || strings.Contains(r.URL.RawPath, "%2") {
		return false // a path that names another one ("..", "%2F") is passed on nowhere
	}
	switch {
	case under(p, wellKnownResource):
		if d.answerable(w, r) {
			d.serveResource(w, r, p[len(wellKnownResource):])
		}
	case !d.passThrough():
		return false // nothing else to pass through
	case d.isServerDoc(r, p):
		if d.answerable(w, r) {
			d.serveServer(w, r, p)
		}
	case strings.Contains(p, "/.well-known/"):
		return false // no endpoint lives there, whatever a document says
	case d.isEndpoint(r, p):
		d.passEndpoint(w, r, p)
	default:
		return false
	}
	return true
}

// passThrough reports whether the upstream's authorization server
// metadata and endpoints are passed through: when the upstream has an
// origin and the gateway's own metadata names no authorization server
// (no validation, or introspection without an issuer, where the
// upstream's authorization servers are named).
func (d *OAuthMeta) passThrough() bool {
	return d.upURL != nil && (d.own == nil || len(d.own.Metadata().AuthorizationServers) == 0)
}

// isServerDoc reports whether p is where authorization server metadata
// is defined: RFC 8414's or OpenID Connect's well-known path, at the root
// or with an issuer's path inserted, or OpenID Connect's appended to the
// path of an issuer the upstream's protected resource metadata names.
// Only plain segments go upstream: a server that reads "..;" as ".."
// (Tomcat's path parameters, RFC 3986 §3.3 leaves ";" to the scheme)
// would otherwise resolve "/.well-known/oauth-authorization-server/..;/
// ..;/admin" to "/admin".
func (d *OAuthMeta) isServerDoc(r *http.Request, p string) bool {
	inserted := under(p, wellKnownServer) || under(p, wellKnownOIDC)
	if !inserted && !strings.HasSuffix(p, wellKnownOIDC) || !plainPath(p) {
		return false
	}
	return inserted || slices.Contains(d.issuerPaths(r), strings.TrimSuffix(p, wellKnownOIDC))
}

// issuerPaths are the paths (without a trailing "/", none for the root)
// of the authorization servers on the upstream's origin that its
// protected resource metadata names.
func (d *OAuthMeta) issuerPaths(r *http.Request) []string {
	doc, err := d.upstreamResource(r)
	if err != nil || doc.status != http.StatusOK {
		return nil
	}
	var out []string
	for _, iss := range stringsOf(doc.doc["authorization_servers"]) {
		if rest, ok := onOrigin(iss, d.upstreamOrigin()); ok {
			if u, err := url.Parse(rest); err == nil && strings.TrimSuffix(u.Path, "/") != "" {
				out = append(out, strings.TrimSuffix(u.Path, "/"))
			}
		}
	}
	return out
}

// stringsOf is v's strings: v a JSON string or array.
func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// plainPath reports whether every segment of p is unreserved characters
// only (RFC 3986 §2.3: A-Z a-z 0-9 . _ ~ -) and none starts with "..":
// nothing a server could read as another path, a parameter or an escape.
func plainPath(p string) bool {
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || strings.HasPrefix(seg, "..") {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '~' || c == '-') {
				return false
			}
		}
	}
	return true
}

// under reports whether path is prefix or below it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix) && path[len(prefix)] == '/'
}

// answerable answers what is not a GET of a metadata document (a CORS
// preflight, a wrong method), and reports whether r is a GET (or HEAD).
// Metadata is public: any origin may read it, as browser-based clients
// must (RFC 9728 §3, RFC 8414 §3 use plain GETs).
func (d *OAuthMeta) answerable(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return true
	case http.MethodOptions:
		w.Header().Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "MCP-Protocol-Version")
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
	return false
}

// serveResource serves the protected resource metadata of the MCP
// endpoint (RFC 9728 §3): at the well-known path with the endpoint's path
// inserted (§3.1), or without it (the root form clients fall back to).
func (d *OAuthMeta) serveResource(w http.ResponseWriter, r *http.Request, suffix string) {
	if suffix != "" && suffix != d.pub.mcpPath() && suffix != d.path {
		http.NotFound(w, r)
		return
	}
	if d.own != nil {
		d.serveOwnResource(w, r)
		return
	}
	if d.upURL == nil {
		http.NotFound(w, r)
		return
	}
	doc, err := d.upstreamResource(r)
	if err != nil {
		d.failed(w, r, err)
		return
	}
	if doc.status != http.StatusOK {
		http.Error(w, http.StatusText(doc.status), doc.status)
		return
	}
	out := d.rewrite(r, doc.doc).(map[string]any)
	out["resource"] = d.pub.MCPURL(r) // RFC 9728 §3.3: the URL the client asked about
	writeMetadata(w, out)
}

// serveOwnResource serves the gateway's own document when it validates
// tokens: its authorization servers are the issuer it is configured with
// or, without one (introspection alone), those of the upstream's own
// document, so a client can find where to sign in (RFC 9728 §2:
// authorization_servers), with the upstream's scopes_supported unless the
// gateway requires scopes of its own.
func (d *OAuthMeta) serveOwnResource(w http.ResponseWriter, r *http.Request) {
	m := d.own.Metadata()
	if len(m.AuthorizationServers) == 0 && d.upURL != nil {
		up, err := d.upstreamResource(r)
		if err != nil {
			d.failed(w, r, err)
			return
		}
		if up.status == http.StatusOK {
			doc := d.rewrite(r, up.doc).(map[string]any)
			m.AuthorizationServers = stringsOf(doc["authorization_servers"])
			if len(m.ScopesSupported) == 0 {
				m.ScopesSupported = stringsOf(doc["scopes_supported"])
			}
		}
	}
	doc := map[string]any{"resource": d.pub.MCPURL(r), "bearer_methods_supported": []string{"header"}}
	if len(m.AuthorizationServers) > 0 {
		doc["authorization_servers"] = m.AuthorizationServers
	}
	if len(m.ScopesSupported) > 0 {
		doc["scopes_supported"] = m.ScopesSupported
	}
	writeMetadata(w, doc)
}

// upstreamResource is the upstream's protected resource metadata:
// path-inserted first, then the root form, the order MCP clients try
// (MCP 2025-11-25, Authorization, "Protected Resource Metadata Discovery
// Requirements"); a 404 when it has neither.
func (d *OAuthMeta) upstreamResource(r *http.Request) (*upstreamDoc, error) {
	paths := []string{wellKnownResource + strings.TrimSuffix(d.upURL.EscapedPath(), "/")}
	if paths[0] != wellKnownResource {
		paths = append(paths, wellKnownResource)
	}
	var doc *upstreamDoc
	for _, p := range paths {
		var err error
		if doc, err = d.fetch(r, p); err != nil || doc.status == http.StatusOK {
			return doc, err
		}
	}
	return doc, nil
}

// serveServer serves the upstream origin's authorization server metadata
// at the same path, its URLs on the upstream's origin moved to the
// gateway's.
func (d *OAuthMeta) serveServer(w http.ResponseWriter, r *http.Request, p string) {
	doc, err := d.fetch(r, p) // p is plainPath: its escaped form is itself
	if err != nil {
		d.failed(w, r, err)
		return
	}
	if doc.status != http.StatusOK {
		http.Error(w, http.StatusText(doc.status), doc.status)
		return
	}
	writeMetadata(w, d.rewrite(r, doc.doc))
}

// failed answers a discovery request whose upstream document could not be
// had.
func (d *OAuthMeta) failed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	d.log.Warn().Str("op", "discovery").Str("path", r.URL.Path).Err(err).Msg("the upstream's OAuth metadata is unavailable")
	http.Error(w, "the upstream's OAuth metadata is unavailable", http.StatusBadGateway)
}

func writeMetadata(w http.ResponseWriter, doc any) {
	b, _ := json.Marshal(doc)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// fetch is the upstream's document at path, from the cache while it is
// fresh. A 4xx is cached too (briefly); a failure is not.
func (d *OAuthMeta) fetch(r *http.Request, path string) (*upstreamDoc, error) {
	now := d.now()
	d.mu.Lock()
	doc, ok := d.docs[path]
	d.mu.Unlock()
	if ok && now.Before(doc.expires) {
		return doc, nil
	}
	ctx := upstream.WithMethod(r.Context(), "oauth")
	resp, err := d.up.ForwardPath(ctx, http.MethodGet, path, "", http.Header{"Accept": {"application/json"}}, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	doc = &upstreamDoc{status: resp.StatusCode, expires: now.Add(discoveryMissTTL)}
	switch {
	case resp.StatusCode == http.StatusOK:
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
		if err != nil {
			return nil, err
		}
		if len(body) > maxMetadataBytes || json.Unmarshal(body, &doc.doc) != nil || doc.doc == nil {
			return nil, errMetadata
		}
		doc.expires = now.Add(discoveryTTL)
		if !under(path, wellKnownResource) {
			doc.endpoints = d.endpointsOf(doc.doc)
		}
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		doc.status = http.StatusNotFound // nothing here, whatever the reason
	default:
		return nil, &upstream.StatusError{Status: resp.StatusCode}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.docs) >= discoveryEntries {
		for k, v := range d.docs {
			if !now.Before(v.expires) || len(d.docs) >= discoveryEntries {
				delete(d.docs, k)
			}
		}
	}
	d.docs[path] = doc
	return doc, nil
}

// upstreamOrigin is the upstream's origin, "http://host:port".
func (d *OAuthMeta) upstreamOrigin() string { return d.upURL.Scheme + "://" + d.upURL.Host }

// rewrite copies v, a JSON value, with every URL on the upstream's origin
// moved to the gateway's origin for r.
func (d *OAuthMeta) rewrite(r *http.Request, v any) any {
	from, to := d.upstreamOrigin(), d.pub.origin(r)
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			if rest, ok := onOrigin(v, from); ok {
				return to + rest
			}
			return v
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				out[i] = walk(e)
			}
			return out
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, e := range v {
				out[k] = walk(e)
			}
			return out
		}
		return v
	}
	return walk(v)
}

// onOrigin reports whether s is a URL on origin, and returns what follows
// the origin ("/token", "" for the origin itself).
func onOrigin(s, origin string) (rest string, ok bool) {
	if len(s) < len(origin) || !strings.EqualFold(s[:len(origin)], origin) {
		return "", false
	}
	rest = s[len(origin):]
	if rest != "" && rest[0] != '/' && rest[0] != '?' && rest[0] != '#' {
		return "", false // "http://host:30001" is not on "http://host:3000"
	}
	return rest, true
}

// endpointsOf are the paths on the upstream's origin that an authorization
// server metadata document names, other than metadata and the MCP
// endpoint: its authorization, token, registration endpoints and the
// like, which a client then calls on the gateway's origin.
func (d *OAuthMeta) endpointsOf(doc map[string]any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			rest, ok := onOrigin(v, d.upstreamOrigin())
			if !ok {
				return
			}
			u, err := url.Parse(rest)
			if err != nil || u.Path == "" || u.Path == "/" || strings.HasPrefix(u.Path, "/.well-known/") || u.Path == d.upURL.Path || u.Path == d.path {
				return
			}
			out = append(out, u.Path)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return out
}

// isEndpoint reports whether path is an endpoint the upstream's
// authorization server metadata names on its origin. It looks at the
// documents fetched so far and, when none names path, at the two root
// documents (so a replica that served none of the metadata knows the
// endpoints too); both are cached, so an unknown path costs no upstream
// request once they are. An upstream with neither document has the
// default endpoints of MCP 2025-03-26 (Authorization, "Fallbacks for
// Servers without Metadata Discovery"), which its clients use.
func (d *OAuthMeta) isEndpoint(r *http.Request, path string) bool {
	if d.named(path) {
		return true
	}
	none := true
	for _, p := range []string{wellKnownServer, wellKnownOIDC} {
		doc, err := d.fetch(r, p)
		if err != nil {
			return false
		}
		none = none && doc.status != http.StatusOK
	}
	if none {
		return path == "/authorize" || path == "/token" || path == "/register"
	}
	return d.named(path)
}

// named reports whether a fresh cached document names path.
func (d *OAuthMeta) named(path string) bool {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, doc := range d.docs {
		if now.Before(doc.expires) {
			for _, e := range doc.endpoints {
				if e == path {
					return true
				}
			}
		}
	}
	return false
}

// passEndpoint relays r to p, the endpoint's path the metadata names, on
// the upstream's origin, and its answer back, with a redirect to the
// upstream's origin moved to the gateway's. The client's claims about its
// address are dropped, as at the front door.
func (d *OAuthMeta) passEndpoint(w http.ResponseWriter, r *http.Request, p string) {
	var body io.Reader
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		body = http.MaxBytesReader(w, r.Body, d.maxBody)
	}
	ctx := upstream.WithMethod(r.Context(), "oauth")
	hdr := r.Header.Clone()
	DropForwarding(hdr)
	resp, err := d.up.ForwardPath(ctx, r.Method, (&url.URL{Path: p}).EscapedPath(), r.URL.RawQuery, hdr, body)
	if err != nil {
		if r.Context().Err() == nil {
			d.log.Warn().Str("op", "discovery").Str("path", r.URL.Path).Err(err).Msg("the upstream's authorization endpoint failed")
			http.Error(w, "the upstream's authorization endpoint is unavailable", http.StatusBadGateway)
		}
		return
	}
	defer resp.Body.Close()
	upstreamside.CopyUpstreamHeader(w.Header(), resp.Header)
	if loc := resp.Header.Get("Location"); loc != "" {
		if rest, ok := onOrigin(loc, d.upstreamOrigin()); ok {
			w.Header().Set("Location", d.pub.origin(r)+rest)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(upstreamside.WriterOnly{Writer: w}, resp.Body)
}

// PointChallenges points the resource_metadata of the Bearer challenges in
// hdr's WWW-Authenticate (RFC 9728 §5.1) at metaURL, the gateway's own
// metadata: a client that followed the upstream's would find a resource
// other than the URL it called, and refuse it (RFC 9728 §3.3).
func PointChallenges(hdr http.Header, metaURL string) {
	values := hdr["Www-Authenticate"]
	for i, v := range values {
		if nv, ok := withResourceMetadata(v, metaURL); ok {
			if i == 0 {
				values = append([]string(nil), values...) // not the upstream's own slice
				hdr["Www-Authenticate"] = values
			}
			values[i] = nv
		}
	}
}

// withResourceMetadata returns challenge with the value of each
// resource_metadata auth-param (RFC 9110 §11.2) replaced by url, and
// whether it had one. Quoted strings are skipped whole, so a parameter
// named inside another's value is left alone.
func withResourceMetadata(challenge, url string) (string, bool) {
	const name = "resource_metadata"
	var b strings.Builder
	found := false
	i, last := 0, 0
	for i < len(challenge) {
		c := challenge[i]
		if c == '"' {
			i = skipQuoted(challenge, i)
			continue
		}
		boundary := i == 0 || challenge[i-1] == ' ' || challenge[i-1] == ',' || challenge[i-1] == '\t'
		if !boundary || len(challenge)-i < len(name) || !strings.EqualFold(challenge[i:i+len(name)], name) {
			i++
			continue
		}
		j := i + len(name)
		for j < len(challenge) && (challenge[j] == ' ' || challenge[j] == '\t') {
			j++
		}
		if j == len(challenge) || challenge[j] != '=' {
			i++
			continue
		}
		j++
		for j < len(challenge) && (challenge[j] == ' ' || challenge[j] == '\t') {
			j++
		}
		end := j
		if end < len(challenge) && challenge[end] == '"' {
			end = skipQuoted(challenge, end)
		} else {
			for end < len(challenge) && challenge[end] != ',' && challenge[end] != ' ' && challenge[end] != '\t' {
				end++
			}
		}
		b.WriteString(challenge[last:j])
		b.WriteString(strconv.Quote(url))
		last, i, found = end, end, true
	}
	if !found {
		return challenge, false
	}
	b.WriteString(challenge[last:])
	return b.String(), true
}

// skipQuoted returns the index just past the quoted-string starting at
// s[i] (or len(s) when it is not closed).
func skipQuoted(s string, i int) int {
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(s)
}
