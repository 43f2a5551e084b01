package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/gateway"
	"github.com/taskgate/taskgate/upstream"
)

func fallbackFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "fallback-tools", Category: catFallback, EnvVars: env("fallback-tools"),
			Usage: "give clients that cannot do tasks a task for a long call of a task candidate, and the tools to follow it (task_status, task_result, task_cancel, task_answer)"},
		&cli.StringFlag{Name: "fallback-prefix", Category: catFallback, Value: gateway.DefaultFallbackPrefix, EnvVars: env("fallback-prefix"),
			Usage: "`PREFIX` of the fallback tools' names; it must not make the name of an upstream tool"},
	}
}

// fallbackConfig reads the fallback flags. With the tools on, it lists the
// upstream's tools once: a tool of the same name as a fallback tool is an
// error, since the gateway never hides an upstream tool. An upstream that
// cannot be reached now is not (the replica may start first); the gateway
// then checks every tools/list answer and logs a clash.
func fallbackConfig(c *cli.Context, up *upstream.Client, log zerolog.Logger) (gateway.FallbackTools, error) {
	cfg := gateway.FallbackTools{Enabled: c.Bool("fallback-tools"), Prefix: c.String("fallback-prefix")}
	if !cfg.Enabled {
		return cfg, nil // the prefix means nothing without the tools
	}
	names, err := gateway.FallbackToolNames(cfg.Prefix)
	if err != nil {
		return cfg, fmt.Errorf("invalid --fallback-prefix: %v", err)
	}
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()
	tools, err := listTools(ctx, up, http.Header{})
	if err != nil {
		log.Warn().Str("op", "fallback").Err(err).Msg("cannot list the upstream's tools to check the fallback tools' names; each tools/list answer is checked instead")
		return cfg, nil
	}
	ours := make(map[string]bool, len(names))
	for _, n := range names {
		ours[n] = true
	}
	for _, t := range tools {
		if ours[t.Name] {
			return cfg, fmt.Errorf("--fallback-tools: the upstream has a tool named %q, the name of a fallback tool; choose another --fallback-prefix", t.Name)
		}
	}
	return cfg, nil
}
