package main

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

	"github.com/urfave/cli/v2"
)

// healthcheckCommand probes a running gateway's /readyz: exit 0 when it
// answers 200, else 1 with the reason. The container image has no shell
// or curl, so its HEALTHCHECK runs this.
func healthcheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "healthcheck",
		Usage: "exit 0 when a running gateway's /readyz answers 200, else 1 saying why",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Value: "http://127.0.0.1:8080/readyz", EnvVars: env("healthcheck-url"),
				Usage: "readiness `URL` to probe; a gateway's base URL (http://host:8080) means its /readyz"},
			&cli.DurationFlag{Name: "timeout", Value: 3 * time.Second, Usage: "how long the probe may take"},
		},
		Action: healthcheck,
	}
}

func healthcheck(c *cli.Context) error {
	if c.Args().Len() > 0 {
		return fmt.Errorf("unexpected argument %q: healthcheck takes only flags", c.Args().First())
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	target, err := readyURL(c.String("url"))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("invalid --url %q: %v", c.String("url"), err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var reason string
		if errors.Is(err, context.DeadlineExceeded) {
			reason = "no answer within " + c.Duration("timeout").String()
		} else {
			reason = err.Error()
		}
		return fmt.Errorf("not ready: %s", reason)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: HTTP %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	line := "ready"
	var ready struct {
		Checks map[string]string `json:"checks"`
	}
	if json.Unmarshal(body, &ready) == nil {
		if up, ok := ready.Checks["upstream"]; ok && up != "ok" {
			line += "; the upstream: " + up
		}
		if st, ok := ready.Checks["store"]; ok && st != "ok" { // a Cluster with part of its keyspace down
			line += "; the task store: " + st
		}
	}
	_, err = fmt.Fprintln(c.App.Writer, line)
	return err
}

// readyURL is the URL healthcheck probes: --url, or its /readyz when it is
// a gateway's base URL (no path).
func readyURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("invalid --url %q: want the gateway's URL, e.g. http://127.0.0.1:8080 (its /readyz is probed)", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/readyz"
	}
	return u.String(), nil
}
