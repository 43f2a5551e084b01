package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// healthcheckCommand probes a running gateway's /readyz: exit 0 when it
// answers 200, else 1 with the reason. The container image has no shell
// or curl, so its HEALTHCHECK runs this.
func healthcheckCommand() *cli.Command {
	return &cli.Command{
		Name:         "healthcheck",
		Usage:        "exit 0 when a running gateway's /readyz answers 200, else 1 saying why",
		OnUsageError: usageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Value: "http://127.0.0.1:8080/readyz", EnvVars: env("healthcheck-url"),
				Usage: "readiness `URL` to probe"},
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.String("url"), nil)
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
	_, err = fmt.Fprintln(c.App.Writer, "ready")
	return err
}
