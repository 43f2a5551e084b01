package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/policy"
)

// ruleFlagModes are the policy flags, in the order their environment
// variables are applied (the most specific intent first).
var ruleFlagModes = []struct {
	name string
	mode policy.Mode
}{
	{"sync", policy.Sync},
	{"task-required", policy.TaskRequired},
	{"task", policy.Task},
}

const ruleOrder = "First match wins: flags in command-line order, then TASKGATE_SYNC, TASKGATE_TASK_REQUIRED, TASKGATE_TASK."

func ruleFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringSliceFlag{Name: "task", Category: catPolicy, EnvVars: env("task"),
			Usage: "tools matching `GLOB` may run as tasks (2025-11-25 clients see taskSupport \"optional\"); repeatable, comma-separated. " + ruleOrder},
		&cli.StringSliceFlag{Name: "task-required", Category: catPolicy, EnvVars: env("task-required"),
			Usage: "tools matching `GLOB` must run as tasks (taskSupport \"required\"); repeatable, comma-separated; first match wins (see --task)"},
		&cli.StringSliceFlag{Name: "sync", Category: catPolicy, EnvVars: env("sync"),
			Usage: "tools matching `GLOB` never run as tasks (no taskSupport); repeatable, comma-separated; first match wins (see --task)"},
	}, rerunRuleFlags()...)
}

// taskRules turns --task, --task-required and --sync into policy rules,
// first match wins: the flags in the order they appear on the command line
// (urfave/cli keeps only the order within one flag, so it is read back from
// the arguments), then values from the environment, which apply only to a
// flag not given on the command line, in the order TASKGATE_SYNC,
// TASKGATE_TASK_REQUIRED, TASKGATE_TASK. A bad glob is an error naming the flag.
func taskRules(c *cli.Context) (policy.Rules, error) {
	type spec struct{ flag, glob string }
	var specs []spec
	onCommandLine := map[string]bool{}
	if cmdline, ok := ruleArgs(c); ok {
		for _, s := range cmdline {
			specs = append(specs, spec{s[0], s[1]})
			onCommandLine[s[0]] = true
		}
	}
	// What the arguments say must be what urfave/cli parsed; if not (an
	// argument form this reader does not know), fall back to the fixed order.
	for _, f := range ruleFlagModes {
		var fromArgs []string
		for _, s := range specs {
			if s.flag == f.name {
				fromArgs = append(fromArgs, s.glob)
			}
		}
		if onCommandLine[f.name] && !slices.Equal(fromArgs, nonEmpty(c.StringSlice(f.name))) {
			specs, onCommandLine = nil, map[string]bool{}
			break
		}
	}
	for _, f := range ruleFlagModes {
		if onCommandLine[f.name] {
			continue
		}
		for _, g := range nonEmpty(c.StringSlice(f.name)) {
			specs = append(specs, spec{f.name, g})
		}
	}
	rules := make(policy.Rules, 0, len(specs))
	for _, s := range specs {
		r, err := policy.NewRule(s.glob, modeOf(s.flag))
		if err != nil {
			return nil, fmt.Errorf("invalid --%s: %v", s.flag, err)
		}
		rules = append(rules, r)
	}
	rerun, err := rerunRules(c) // rerun.go
	return append(rules, rerun...), err
}

// ruleArgs reads the rule flags off the serve command's own arguments, in
// order, as {flag, glob} pairs; values are split on commas as urfave/cli
// does. ok is false when the arguments cannot be found.
func ruleArgs(c *cli.Context) (out [][2]string, ok bool) {
	var args []string
	for _, l := range c.Lineage()[1:] {
		if a := l.Args().Slice(); len(a) > 0 && a[0] == c.Command.Name {
			args, ok = a[1:], true
			break
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if modeOf(name) == 0 {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				break
			}
			i++
			val = args[i]
		}
		for _, g := range nonEmpty(strings.Split(val, ",")) {
			out = append(out, [2]string{name, g})
		}
	}
	return out, ok
}

func modeOf(flag string) policy.Mode {
	for _, f := range ruleFlagModes {
		if f.name == flag {
			return f.mode
		}
	}
	return 0
}

// nonEmpty returns the trimmed, non-empty values of vs.
func nonEmpty(vs []string) []string {
	var out []string
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
