package main

import (
	"bytes"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestParseProxies(t *testing.T) {
	got, err := parseProxies([]string{"10.0.0.0/8, 192.0.2.7", "::ffff:192.0.2.8", "2001:db8::1/64"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("192.0.2.8/32"), netip.MustParsePrefix("2001:db8::/64")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseProxies = %v, want %v", got, want)
	}
	if _, err := parseProxies([]string{"10.0.0.0/33"}); err == nil {
		t.Error("10.0.0.0/33: no error")
	}
}

func TestIdentityFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--public-url", "mcp.example.com/mcp"}, `invalid --public-url "mcp.example.com/mcp": the scheme must be http or https`},
		{[]string{"--public-url", "https://mcp.example.com/mcp#x"}, "no user, query or fragment allowed"},
		{[]string{"--trusted-proxies", "10.0.0.0/8,proxy.internal"}, `invalid --trusted-proxies "proxy.internal"`},
	} {
		var out, errOut bytes.Buffer
		err := run(append([]string{"taskgate", "serve", "--upstream", "http://127.0.0.1:1/mcp"}, tt.args...), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line containing %q", tt.args, err, tt.want)
		}
	}
	var help bytes.Buffer
	if err := run([]string{"taskgate", "serve", "--help"}, &help, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	section := help.String()[strings.Index(help.String(), catIdentity):]
	for _, flag := range []string{"--public-url URL", "--trusted-proxies CIDR"} {
		if !strings.Contains(section, flag) {
			t.Errorf("serve --help lists no %s under %q", flag, catIdentity)
		}
	}
}
