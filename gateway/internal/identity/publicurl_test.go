package identity

import (
	"crypto/tls"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestPublicURL(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	cases := []struct {
		name     string
		public   string
		remote   string
		host     string
		tls      bool
		header   map[string][]string
		want     string // mcpURL
		wantMeta string
	}{
		{name: "request host", remote: "192.0.2.1:5000", host: "gw.example:8080",
			want: "http://gw.example:8080/mcp", wantMeta: "http://gw.example:8080/.well-known/oauth-protected-resource/mcp"},
		{name: "tls", remote: "192.0.2.1:5000", host: "GW.example", tls: true, want: "https://gw.example/mcp"},
		{name: "untrusted peer's forwarding ignored", remote: "192.0.2.1:5000", host: "gw.internal",
			header: map[string][]string{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"evil.example"}, "Forwarded": {"proto=https;host=evil.example"}},
			want:   "http://gw.internal/mcp"},
		{name: "trusted X-Forwarded", remote: "10.1.2.3:5000", host: "gw.internal",
			header: map[string][]string{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"mcp.example.com"}},
			want:   "https://mcp.example.com/mcp"},
		{name: "trusted X-Forwarded, appended: the peer's value", remote: "10.1.2.3:5000", host: "gw.internal",
			header: map[string][]string{"X-Forwarded-Proto": {"http, https"}, "X-Forwarded-Host": {"evil.example, mcp.example.com"}},
			want:   "https://mcp.example.com/mcp"},
		{name: "trusted ipv6 peer", remote: "[::1]:5000", host: "gw.internal",
			header: map[string][]string{"X-Forwarded-Proto": {"https"}}, want: "https://gw.internal/mcp"},
		{name: "Forwarded wins over X-Forwarded", remote: "10.1.2.3:5000", host: "gw.internal",
			header: map[string][]string{"Forwarded": {`for=192.0.2.9;proto=https;host="mcp.example.com:8443"`}, "X-Forwarded-Host": {"other.example"}},
			want:   "https://mcp.example.com:8443/mcp"},
		{name: "Forwarded chain: outermost trusted element", remote: "10.1.2.3:5000", host: "gw.internal",
			header: map[string][]string{"Forwarded": {`for=192.0.2.66;host=evil.example, for=192.0.2.9;proto=https;host=mcp.example.com`, `for=10.9.9.9;proto=http;host=inner`}},
			want:   "https://mcp.example.com/mcp"},
		{name: "malformed Forwarded falls back", remote: "10.1.2.3:5000", host: "gw.internal",
			header: map[string][]string{"Forwarded": {`proto=https;host="unterminated`}, "X-Forwarded-Proto": {"https"}},
			want:   "https://gw.internal/mcp"},
		{name: "bad forwarded values ignored", remote: "10.1.2.3:5000", host: "gw.internal",
			header: map[string][]string{"X-Forwarded-Proto": {"gopher"}, "X-Forwarded-Host": {"evil.example/path?x"}},
			want:   "http://gw.internal/mcp"},
		{name: "fixed public URL", public: "https://MCP.example.com/tools/mcp", remote: "10.1.2.3:5000", host: "gw.internal",
			header: map[string][]string{"X-Forwarded-Host": {"other.example"}},
			want:   "https://mcp.example.com/tools/mcp", wantMeta: "https://mcp.example.com/.well-known/oauth-protected-resource/tools/mcp"},
		{name: "fixed public URL without path", public: "https://mcp.example.com", remote: "192.0.2.1:1", host: "x",
			want: "https://mcp.example.com/mcp"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPublicURLs(tc.public, "/mcp", trusted)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("POST", "/mcp", nil)
			r.RemoteAddr, r.Host = tc.remote, tc.host
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for k, v := range tc.header {
				r.Header[k] = v
			}
			if got := p.MCPURL(r); got != tc.want {
				t.Errorf("mcpURL = %q, want %q", got, tc.want)
			}
			if tc.wantMeta != "" {
				if got := p.MetadataURL(r); got != tc.wantMeta {
					t.Errorf("metadataURL = %q, want %q", got, tc.wantMeta)
				}
			}
		})
	}
}

func TestParsePublicURL(t *testing.T) {
	for _, bad := range []string{"", "ftp://x/mcp", "https:///mcp", "mcp.example.com/mcp", "https://u:p@x/mcp", "https://x/mcp?a=b", "https://x/mcp#f", "https://x/mcp?", "http://[::1/mcp"} {
		if _, err := ParsePublicURL(bad); err == nil {
			t.Errorf("ParsePublicURL(%q): no error", bad)
		}
	}
}

func TestParseForwarded(t *testing.T) {
	elems, ok := parseForwarded([]string{`For="[2001:db8::1]:4711";Proto=https, for=10.0.0.1;host=a.example`, ` ,for=unknown`})
	if !ok || len(elems) != 3 || elems[0]["for"] != "[2001:db8::1]:4711" || elems[0]["proto"] != "https" || elems[1]["host"] != "a.example" || elems[2]["for"] != "unknown" {
		t.Fatalf("parseForwarded = %v, %v", elems, ok)
	}
	for _, bad := range []string{`for`, `=x`, `for=a;for=b`, `host="a`, `host=a b`, `for=a;;`, "host=\"a\x01\""} {
		if _, ok := parseForwarded([]string{bad}); ok {
			t.Errorf("parseForwarded(%q) ok", bad)
		}
	}
}

// FuzzForwarded: any Forwarded header parses or is refused, never
// panics, and a host taken from it is one validHost accepts.
func FuzzForwarded(f *testing.F) {
	for _, s := range []string{`for=192.0.2.60;proto=http;by=203.0.113.43`, `for="[2001:db8:cafe::17]:4711"`, `host="a\"b"`, `for=a, for=b;host=c`, `,,`, `proto=https;host=x.example:8443`} {
		f.Add(s, "10.0.0.1:1")
	}
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	f.Fuzz(func(t *testing.T, header, remote string) {
		p := &PublicURLs{path: "/mcp", trusted: trusted}
		r := httptest.NewRequest("GET", "/mcp", nil)
		r.RemoteAddr, r.Host = remote, "gw.internal"
		r.Header.Set("Forwarded", header)
		scheme, host := p.fromRequest(r)
		if scheme != "http" && scheme != "https" || !validHost(host) {
			t.Fatalf("fromRequest(%q) = %q, %q", header, scheme, host)
		}
	})
}
