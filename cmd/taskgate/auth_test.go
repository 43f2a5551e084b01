package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestAuthFlagErrors(t *testing.T) {
	up := "--upstream=http://127.0.0.1:1/mcp"
	iss := "--auth-issuer=https://as.example"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{up, "--auth-audience", "https://gw/mcp"}, "--auth-audience needs --auth-issuer or --auth-introspection-url"},
		{[]string{up, "--auth-required-scopes", "mcp"}, "--auth-required-scopes needs --auth-issuer"},
		{[]string{up, "--auth-forward=false"}, "--auth-forward needs --auth-issuer"},
		{[]string{up, iss, "--auth-client-id", "gw"}, "authenticate to --auth-introspection-url, which is not set"},
		{[]string{up, iss, "--listen", "0.0.0.0:0"}, "set --auth-audience or --public-url"},
		{[]string{up, "--auth-issuer", "ftp://as.example", "--auth-audience", "x"}, `invalid --auth-* flags: auth: issuer "ftp://as.example" is not an http(s) URL`},
		{[]string{up, "--auth-introspection-url", "nope", "--auth-audience", "x"}, "invalid --auth-* flags"},
		{[]string{up, iss, "--auth-audience", "x", "--auth-introspection-rate", "10"}, "--auth-introspection-rate limits calls to --auth-introspection-url, which is not set"},
		{[]string{up, "--auth-introspection-url", "https://as.example/i", "--auth-audience", "x", "--auth-introspection-rate", "-1"}, "invalid --auth-introspection-rate -1"},
		{[]string{up, "--auth-introspection-rate", "10"}, "--auth-introspection-rate needs --auth-issuer or --auth-introspection-url"},
	} {
		err := run(append([]string{"taskgate", "serve"}, tt.args...), &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
}

func TestEnvSetsClientSecret(t *testing.T) {
	t.Setenv("TASKGATE_AUTH_CLIENT_SECRET", "from-env")
	err := run([]string{"taskgate", "serve", "--upstream=http://127.0.0.1:1/mcp"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--auth-client-secret needs --auth-issuer") {
		t.Fatalf("TASKGATE_AUTH_CLIENT_SECRET not read: %v", err)
	}
}

func TestDefaultAudience(t *testing.T) {
	for _, tt := range []struct{ public, scheme, listen, want string }{
		{"https://mcp.example.com", "http", "0.0.0.0:8080", "https://mcp.example.com/mcp"},
		{"https://mcp.example.com/tools/mcp", "http", "0.0.0.0:8080", "https://mcp.example.com/tools/mcp"},
		{"", "http", "127.0.0.1:8282", "http://127.0.0.1:8282/mcp"},
		{"", "https", "[::1]:8443", "https://[::1]:8443/mcp"},
		{"", "http", ":8080", ""},
		{"", "http", "[::]:8080", ""},
	} {
		got, err := defaultAudience(tt.public, tt.scheme, tt.listen, "/mcp")
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("%+v: %q, %v", tt, got, err)
		}
	}
}
