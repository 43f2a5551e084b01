package main

import (
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/webhook"
)

var flagSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// webhooksFrom runs a serve command with the webhook flags on args and
// returns its source and the endpoints it builds first.
func webhooksFrom(t *testing.T, args ...string) (*webhookSource, []webhook.Endpoint, error) {
	t.Helper()
	var src *webhookSource
	var eps []webhook.Endpoint
	var rerr error
	app := &cli.App{Name: "taskgate", Commands: []*cli.Command{{
		Name: "serve", Flags: webhookFlags(),
		Action: func(c *cli.Context) error {
			if src, rerr = newWebhookSource(c); rerr != nil {
				return nil
			}
			data, err := src.read()
			if err != nil {
				rerr = err
				return nil
			}
			eps, rerr = src.build(data)
			return nil
		},
	}}}
	if err := app.Run(append([]string{"taskgate", "serve"}, args...)); err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return src, eps, rerr
}

func TestWebhookFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "webhooks.json")
	writeFile(t, file, `{"endpoints": [{"name": "chat", "url": "https://chat.example.com/hook", "secrets": ["`+flagSecret+`"]}]}`)
	src, eps, err := webhooksFrom(t, "--webhook-url", "http://127.0.0.1:9/h", "--webhook-secret", flagSecret,
		"--webhook-events", "task.completed,task.failed", "--webhook-tools", "deploy_*", "--webhooks", file)
	if err != nil {
		t.Fatal(err)
	}
	if !src.on() || len(eps) != 2 || eps[0].Name != flagEndpoint || len(eps[0].Events) != 2 || eps[0].Tools[0] != "deploy_*" || eps[1].Name != "chat" {
		t.Fatalf("endpoints %+v", eps)
	}
	if src, _, err := webhooksFrom(t); err != nil || src.on() {
		t.Fatalf("no flags: on %v, %v", src.on(), err)
	}
}

func TestWebhookFlagErrors(t *testing.T) {
	dir := t.TempDir()
	dup := filepath.Join(dir, "dup.json")
	writeFile(t, dup, `{"endpoints": [{"name": "default", "url": "https://h/x", "secrets": ["`+flagSecret+`"]}]}`)
	bad := filepath.Join(dir, "bad.json")
	writeFile(t, bad, `{"endpoints": [{"name": "x", "url": "https://h/x", "secrets": ["whsec_Zm9v"]}]}`)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--webhook-secret", flagSecret}, "--webhook-secret needs --webhook-url"},
		{[]string{"--webhook-url", "http://h/x"}, "invalid --webhook-secret: at least one secret"},
		{[]string{"--webhook-url", "ftp://h/x", "--webhook-secret", flagSecret}, `invalid --webhook-url: "ftp://h/x": want an http`},
		{[]string{"--webhook-url", "http://h/x", "--webhook-secret", flagSecret, "--webhook-secret", "hunter2"}, "invalid --webhook-secret #2: a secret must start with whsec_"},
		{[]string{"--webhook-url", "http://h/x", "--webhook-secret", flagSecret, "--webhook-events", "task.done"}, `invalid --webhook-events #1: unknown event "task.done"`},
		{[]string{"--webhook-url", "http://h/x", "--webhook-secret", flagSecret, "--webhook-principals", "bob"}, `invalid --webhook-principals #1: "bob"`},
		{[]string{"--webhook-url", "http://h/x", "--webhook-secret", flagSecret, "--webhook-timeout", "0s"}, "invalid --webhook-timeout 0s: it must be positive"},
		{[]string{"--webhooks", filepath.Join(dir, "none.json")}, "cannot read --webhooks"},
		{[]string{"--webhooks", bad}, `invalid --webhooks: ` + bad + `: endpoint 1 ("x"): secrets[0]: the key is 3 bytes`},
		{[]string{"--webhook-url", "http://h/x", "--webhook-secret", flagSecret, "--webhooks", dup}, `name: "default" is also endpoint 1's name (--webhook-url's endpoint is named "default")`},
		{[]string{"--webhooks", dup, "--console-url", "console.example.com"}, `invalid --console-url "console.example.com"`},
	}
	for _, c := range cases {
		_, _, err := webhooksFrom(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want …%s…", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error repeats a secret: %v", err)
		}
	}
}

// TestWebhooksReload: a changed file is put in force; a broken one
// leaves the endpoints in force.
func TestWebhooksReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "webhooks.json")
	one := `{"endpoints": [{"name": "a", "url": "https://h/a", "secrets": ["` + flagSecret + `"]}]}`
	writeFile(t, file, one)
	src, eps, err := webhooksFrom(t, "--webhooks", file)
	if err != nil {
		t.Fatal(err)
	}
	store, err := taskstore.OpenEmbedded(zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d, err := webhook.New(webhook.Config{Store: taskstore.New(store.Client(), taskstore.Options{}), Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	r := &webhooksReloader{src: src, d: d, log: zerolog.Nop(), last: []byte(one)}
	writeFile(t, file, `{"endpoints": [{"name": "b", "url": "https://h/b", "secrets": ["`+flagSecret+`"]}]}`)
	r.reload(false)
	if got := d.Endpoints(); len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("after a change: %+v", got)
	}
	writeFile(t, file, `{"endpoints": [{"name": "c"}]}`)
	r.reload(true)
	if got := d.Endpoints(); len(got) != 1 || got[0].Name != "b" || r.lastErr == "" {
		t.Fatalf("after a broken file: %+v (%s)", got, r.lastErr)
	}
}
