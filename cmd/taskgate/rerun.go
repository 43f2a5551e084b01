package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/gateway"
	"github.com/taskgate/taskgate/policy"
)

// Durable tasks (docs/durable.md): which tools may run again (--rerun,
// --no-rerun: rules, which beat the upstream's readOnlyHint and
// idempotentHint), and how often (--max-attempts, --rerun-backoff).

func rerunRuleFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "rerun", Category: catPolicy, EnvVars: env("rerun"),
			Usage: "tasks of tools matching `GLOB` run again when their replica or the upstream fails under them, whatever their annotations say; repeatable, comma-separated. --no-rerun is checked first, then --rerun, then the rules file's \"rerun\"; a tool no rule names reruns when the upstream marks it readOnlyHint or idempotentHint"},
		&cli.StringSliceFlag{Name: "no-rerun", Category: catPolicy, EnvVars: env("no-rerun"),
			Usage: "tasks of tools matching `GLOB` never run again, whatever their annotations promise; repeatable, comma-separated (see --rerun)"},
	}
}

func rerunFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "max-attempts", Category: catTasks, Value: gateway.DefaultMaxAttempts, EnvVars: env("max-attempts"),
			Usage: "attempts a task of a rerunnable tool may have in all (1: never run again); then it fails naming the attempts and the last cause"},
		&cli.DurationFlag{Name: "rerun-backoff", Category: catTasks, Value: gateway.DefaultRerunBackoff, EnvVars: env("rerun-backoff"),
			Usage: "wait before a task's first rerun, doubled for each next one (at most half of --lease)"},
	}
}

// rerunRules turns --no-rerun and --rerun into rules: the refusals first,
// so that a tool both name does not run again.
func rerunRules(c *cli.Context) (policy.Rules, error) {
	var rules policy.Rules
	for _, f := range []struct {
		name  string
		rerun bool
	}{{"no-rerun", false}, {"rerun", true}} {
		for _, g := range nonEmpty(c.StringSlice(f.name)) {
			r, err := policy.NewRerunRule(g, f.rerun)
			if err != nil {
				return nil, fmt.Errorf("invalid --%s: %v", f.name, err)
			}
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// checkRerunFlags checks --max-attempts and --rerun-backoff.
func checkRerunFlags(c *cli.Context) error {
	if n := c.Int("max-attempts"); n < 1 {
		return fmt.Errorf("invalid --max-attempts %d: it must be at least 1 (1: never run a task again)", n)
	}
	if d := c.Duration("rerun-backoff"); d <= 0 {
		return fmt.Errorf("invalid --rerun-backoff %s: it must be positive", d)
	}
	return nil
}
