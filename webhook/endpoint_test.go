package webhook

import (
	"strings"
	"testing"
)

const testPrincipal = "principal:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestEndpointCheck(t *testing.T) {
	ok := Endpoint{Name: "chat", URL: "https://hooks.example.com/x", Secrets: []string{testSecret}}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		mod  func(*Endpoint)
		want string
	}{
		{func(e *Endpoint) { e.Name = "" }, "name: want 1 to 64"},
		{func(e *Endpoint) { e.Name = "a{b}" }, "name: \"a{b}\": only letters"},
		{func(e *Endpoint) { e.URL = "ftp://x/y" }, "url: \"ftp://x/y\": want an http"},
		{func(e *Endpoint) { e.URL = "https://user:pw@x/y" }, "url: the URL carries a user"},
		{func(e *Endpoint) { e.URL = "/relative" }, "url: \"/relative\": want an http"},
		{func(e *Endpoint) { e.URL = "https:///nohost" }, "no host"},
		{func(e *Endpoint) { e.Secrets = nil }, "secrets: at least one"},
		{func(e *Endpoint) { e.Secrets = []string{testSecret, "nope"} }, "secrets[1]: a secret must start with whsec_"},
		{func(e *Endpoint) { e.Events = []string{"task.completed", "task.done"} }, "events[1]: unknown event \"task.done\""},
		{func(e *Endpoint) { e.Tools = []string{"[a-"} }, "tools[0]: bad tool glob"},
		{func(e *Endpoint) { e.Principals = []string{"user:bob"} }, "principals[0]: \"user:bob\": want principal:"},
		{func(e *Endpoint) { e.Principals = []string{"auth:abc"} }, "principals[0]: \"auth:abc\": the digest"},
	}
	for _, c := range cases {
		e := ok
		c.mod(&e)
		err := e.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want …%s…", err, c.want)
		}
	}
}

func TestEndpointWants(t *testing.T) {
	e := Endpoint{Events: []string{EventInputRequired, EventFailed}, Tools: []string{"deploy_*", "gh/*"}, Principals: []string{testPrincipal}}
	cases := []struct {
		typ, tool, owner string
		want             bool
	}{
		{EventInputRequired, "deploy_prod", testPrincipal, true},
		{EventFailed, "gh/a/b", testPrincipal, true},
		{EventCompleted, "deploy_prod", testPrincipal, false},
		{EventFailed, "search", testPrincipal, false},
		{EventFailed, "deploy_prod", "auth:" + strings.Repeat("0", 64), false},
	}
	for _, c := range cases {
		if got := e.Wants(c.typ, c.tool, c.owner); got != c.want {
			t.Errorf("Wants(%s, %s, %s) = %v", c.typ, c.tool, c.owner, got)
		}
	}
	if !(Endpoint{}).Wants(EventRerun, "x", "anon:1") {
		t.Error("an endpoint without filters must want everything")
	}
}

func TestCheckEndpointsUniqueNames(t *testing.T) {
	e := Endpoint{Name: "a", URL: "http://127.0.0.1:1/", Secrets: []string{testSecret}}
	err := CheckEndpoints([]Endpoint{e, e})
	if err == nil || !strings.Contains(err.Error(), "endpoint 2: name: \"a\" is also endpoint 1's name") {
		t.Fatalf("got %v", err)
	}
}
