package console

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// The names the host tests configure: --console-host console.example.com
// (any port) and ops.example.com:8443, --console-listen
// gw-1.internal:9090.
var (
	testHosts  = []string{"console.example.com", "ops.example.com:8443"}
	testListen = "gw-1.internal:9090"
)

func hostConsole(t testing.TB, tok string) *fixture {
	return newFixture(t, tok, func(c *Config) { c.Hosts, c.Listen = testHosts, testListen })
}

// serve sends a request straight to the handler (any Host, no network).
func (f *fixture) serve(method, target, host string, hdr map[string]string, form string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://127.0.0.1:9090"+target, strings.NewReader(form))
	req.Host = host
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.con.ServeHTTP(w, req)
	return w
}

// TestConsoleHosts: the names served, besides localhost and IP literals,
// are the --console-listen host and the --console-host names, with their
// ports; a proxy that rewrites Host still posts from a configured origin.
func TestConsoleHosts(t *testing.T) {
	f := hostConsole(t, "")
	for host, want := range map[string]int{
		"console.example.com": 200, "CONSOLE.example.com:1234": 200, "ops.example.com:8443": 200, "gw-1.internal:9090": 200,
		"gw-1.internal:80": 200, "127.0.0.1:9090": 200, "localhost": 200, "[::1]:9090": 200, "192.0.2.7:8080": 200,
		"ops.example.com": 421, "ops.example.com:443": 421, "ops.example.com:8444": 421, "evil.console.example.com": 421,
		"console.example.com.": 421, "console.example.com.evil.example": 421, "localhost.": 421, "x.localhost": 421,
		"": 421, "127.1": 421, "0x7f.0.0.1": 421, "2130706433": 421, "::1": 421, "[::1]:": 421, "[::1]:0": 421,
		"[::1]:65536": 421, "[fe80::1%25eth0]": 421, "[console.example.com]": 421, "127.0.0.1:9090:1": 421,
		"console.example.com@evil.example": 421, "evil.example/console.example.com": 421,
	} {
		if w := f.serve("GET", "/replicas", host, nil, ""); w.Code != want {
			t.Errorf("GET /replicas as %q = %d, want %d", host, w.Code, want)
		}
	}
	// Behind a proxy that sends its own upstream address as Host, the
	// browser's Origin is the public name: a configured one is accepted.
	tk := f.create(authOwner, "slow")
	for origin, want := range map[string]int{
		"https://console.example.com": 303, "https://ops.example.com:8443": 303, "http://gw-1.internal:9090": 303,
		"https://ops.example.com": 403, "https://evil.example": 403, "http://localhost:9090": 403,
	} {
		w := f.serve("POST", "/tasks/"+tk.ID+"/cancel", "127.0.0.1:9090", map[string]string{"Origin": origin}, "csrf="+f.con.csrf)
		if w.Code != want && !(want == 303 && w.Code == http.StatusConflict) {
			t.Errorf("cancel from %s = %d %s, want %d", origin, w.Code, w.Body, want)
		}
	}
	for _, bad := range [][]string{{"https://console.example.com"}, {"console.example.com/x"}, {"console.example.com:0"},
		{"console.example.com:99999"}, {"*.example.com"}, {"a b"}, {""}, {"-x.example"}, {"x..example"}, {"host:"}} {
		if _, err := New(Config{Store: f.store, Hosts: bad}); err == nil || !strings.Contains(err.Error(), "--console-host") {
			t.Errorf("New with Hosts %q = %v, want an error naming --console-host", bad, err)
		}
	}
	if err := CheckHosts([]string{"localhost:9090", "10.0.0.5", "[::1]", "console_1", "Console.Example.COM:443"}); err != nil {
		t.Errorf("CheckHosts of good names: %v", err)
	}
}

// refServed is an independent reading of which Host values the test's
// console serves, through net/url: localhost or an IP literal (IPv6 in
// brackets) on any port, else a configured name with its port.
func refServed(host string) bool {
	if host == "" || strings.ContainsAny(host, "/?#@\\%") || strings.HasSuffix(host, ":") {
		return false
	}
	u, err := url.Parse("http://" + host + "/")
	if err != nil || u.Host != host {
		return false
	}
	name, port := strings.ToLower(u.Hostname()), u.Port()
	if port != "" {
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 || port[0] == '0' {
			return false
		}
	}
	if ip := net.ParseIP(name); ip != nil {
		return strings.Contains(name, ":") == strings.HasPrefix(host, "[")
	}
	switch name {
	case "localhost", "console.example.com", "gw-1.internal":
		return !strings.HasPrefix(host, "[")
	case "ops.example.com":
		return port == "8443"
	}
	return false
}

// refOrigin is an independent reading of whether a change from src
// (Origin, else Referer) to host comes from the console: the same scheme
// and authority (default ports left out), or a configured name.
func refOrigin(src, host string) bool {
	u, err := url.Parse(src)
	if src == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Host == "" {
		return false
	}
	def := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	strip := func(h string) string { return strings.TrimSuffix(strings.ToLower(h), ":"+def) }
	if strip(u.Host) == strip(host) {
		return true
	}
	return refServed(u.Host) && !(net.ParseIP(u.Hostname()) != nil || strings.EqualFold(u.Hostname(), "localhost"))
}

// FuzzHostOrigin: the console answers (anything but 421) only a Host
// refServed serves, and takes a change (logout: 303) only from an origin
// refOrigin accepts.
func FuzzHostOrigin(f *testing.F) {
	for _, s := range [][3]string{
		{"127.0.0.1:9090", "http://127.0.0.1:9090", ""}, {"rebind.attacker.example:9090", "http://rebind.attacker.example:9090", ""},
		{"console.example.com", "https://console.example.com", ""}, {"127.0.0.1:9090", "https://ops.example.com:8443", ""},
		{"localhost:8080", "", "http://localhost:8080/tasks/x"}, {"[::1]", "null", ""}, {"ops.example.com", "", ""},
		{"LOCALHOST:1", "http://localhost:1", ""}, {"[::ffff:127.0.0.1]:80", "http://[::ffff:127.0.0.1]", ""},
		{"gw-1.internal", "http://gw-1.internal:80", ""}, {"console.example.com:443", "https://console.example.com", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	fx := hostConsole(f, "")
	f.Fuzz(func(t *testing.T, host, origin, referer string) {
		if w := fx.serve("GET", "/replicas", host, nil, ""); (w.Code != http.StatusMisdirectedRequest) != refServed(host) {
			t.Fatalf("GET as Host %q = %d, reference serves: %v", host, w.Code, refServed(host))
		}
		hdr := map[string]string{"Origin": origin, "Referer": referer}
		w := fx.serve("POST", "/logout", host, hdr, "")
		src := origin
		if src == "" {
			src = referer
		}
		if w.Code == http.StatusSeeOther && !(refServed(host) && refOrigin(src, host)) {
			t.Fatalf("logout as Host %q from Origin %q Referer %q was taken", host, origin, referer)
		}
	})
}

var schemeStart = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// staysOn resolves loc as a browser resolves a Location against base:
// the URL Standard's clean-up first (leading and trailing C0 controls and
// spaces stripped, tabs and newlines removed, '\' read as '/' in an
// http(s) URL), then RFC 3986 §5.2 through net/url. Any scheme counts as
// leaving (a browser keeps "http:x" on the origin; this checker is the
// stricter).
func staysOn(base *url.URL, loc string) bool {
	s := strings.TrimFunc(loc, func(r rune) bool { return r <= ' ' })
	s = strings.NewReplacer("\t", "", "\n", "", "\r", "", `\`, "/").Replace(s)
	if schemeStart.MatchString(s) {
		return false
	}
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	r := base.ResolveReference(u)
	return r.Scheme == base.Scheme && r.Host == base.Host && r.User == nil
}

// FuzzNext: whatever next the login form gets, the operator is sent to
// a place a browser keeps on the console's origin, also once a proxy has
// decoded its path.
func FuzzNext(f *testing.F) {
	for _, s := range []string{"/", "/tasks/x?show=result", "/\t/evil.example", "//evil", "/\\evil", "/%09/evil", "https:evil",
		"/%2F%2Fevil", "/%5C%5Cevil", " /x", "/a/../..//evil", "/.//evil", "?next=//evil", "#x", "/x#//evil", "/%zz"} {
		f.Add(s)
	}
	fx := hostConsole(f, "")
	base, _ := url.Parse("http://console.example.com:9090/login")
	f.Fuzz(func(t *testing.T, next string) {
		for _, loc := range []string{safeNext(next), redirected(t, fx, next)} {
			path, rest, _ := strings.Cut(loc, "?")
			dec, err := url.PathUnescape(path)
			if err != nil {
				t.Fatalf("next %q: %q does not decode: %v", next, loc, err)
			}
			// The decoded path is text now: a '%' in it is a character.
			if !staysOn(base, loc) || !staysOn(base, strings.ReplaceAll(dec, "%", "%25")+"?"+rest) {
				t.Fatalf("next %q sends the browser to %q, off the console", next, loc)
			}
		}
	})
}

// redirected is where the login form (no token) sends the browser for next.
func redirected(t *testing.T, fx *fixture, next string) string {
	form := url.Values{"next": {next}}.Encode()
	w := fx.serve("POST", "/login", "console.example.com:9090", map[string]string{"Origin": "http://console.example.com:9090"}, form)
	if w.Code == http.StatusBadRequest && len(form) > 4096 {
		return "/" // a form over the limit: no redirect
	}
	if w.Code != http.StatusSeeOther {
		t.Fatalf("login with next %q = %d %s", next, w.Code, w.Body)
	}
	return w.Header().Get("Location")
}

// TestRefusalsLogSampled: a page that retries a refused request in a loop
// gets the same refusal each time, but the operator's log gets a few lines,
// not one per request.
func TestRefusalsLogSampled(t *testing.T) {
	var buf bytes.Buffer
	f := newFixture(t, "", func(c *Config) { c.Logger = zerolog.New(&buf) })
	for range 200 {
		if w := f.serve(http.MethodGet, "/", "rebind.attacker.example", nil, ""); w.Code != http.StatusMisdirectedRequest {
			t.Fatalf("HTTP %d, want 421", w.Code)
		}
	}
	if n := strings.Count(buf.String(), `"op":"console_host"`); n == 0 || n > 50 {
		t.Fatalf("%d log lines for 200 refusals, want a sampled few (at least one)", n)
	}
}
