package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/policy"
)

// rulesFrom runs a serve command with the rule flags on args and returns
// the rules it builds.
func rulesFrom(t *testing.T, args ...string) (policy.Rules, error) {
	t.Helper()
	var rules policy.Rules
	var rerr error
	app := &cli.App{Name: "taskgate", Commands: []*cli.Command{{
		Name:  "serve",
		Flags: append([]cli.Flag{&cli.StringFlag{Name: "upstream"}}, ruleFlags()...),
		Action: func(c *cli.Context) error {
			rules, rerr = taskRules(c)
			return nil
		},
	}}}
	if err := app.Run(append([]string{"taskgate", "serve"}, args...)); err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return rules, rerr
}

func ruleString(rs policy.Rules) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, r.Mode.String()+":"+r.Glob)
	}
	return strings.Join(parts, " ")
}

func TestTaskRulesOrder(t *testing.T) {
	tests := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, ""},
		{nil, []string{"--task", "*", "--sync", "danger_*"}, "task:* sync:danger_*"},
		{nil, []string{"--sync=danger_*", "--upstream", "http://x/mcp", "-task", "a,b", "--task-required", "slow", "--task", "c"},
			"sync:danger_* task:a task:b task-required:slow task:c"},
		// The environment applies to flags not on the command line, after them,
		// sync before task-required before task.
		{map[string]string{"TASKGATE_TASK": "*", "TASKGATE_SYNC": "x, y", "TASKGATE_TASK_REQUIRED": "slow_*"}, nil,
			"sync:x sync:y task-required:slow_* task:*"},
		{map[string]string{"TASKGATE_TASK": "*", "TASKGATE_SYNC": "x"}, []string{"--task", "only"}, "task:only sync:x"},
		// A value that merely looks like a rule flag belongs to another flag.
		{nil, []string{"--upstream", "--task", "--task", "t"}, "task:t"},
		{nil, []string{"--task", "a", "--", "--sync", "b"}, "task:a"},
	}
	for _, tt := range tests {
		for k, v := range tt.env {
			t.Setenv(k, v)
		}
		rs, err := rulesFrom(t, tt.args...)
		if err != nil {
			t.Errorf("%v %v: %v", tt.env, tt.args, err)
		} else if got := ruleString(rs); got != tt.want {
			t.Errorf("%v %v: rules %q, want %q", tt.env, tt.args, got, tt.want)
		}
		for k := range tt.env {
			t.Setenv(k, "")
		}
	}
}

func TestTaskRulesBadGlob(t *testing.T) {
	if _, err := rulesFrom(t, "--task", "ok", "--sync", "[a-"); err == nil || !strings.Contains(err.Error(), "invalid --sync") {
		t.Errorf("bad --sync glob: %v", err)
	}
	err := run([]string{"taskgate", "serve", "--upstream=http://127.0.0.1:1/mcp", "--task-required", "[x"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.HasPrefix(err.Error(), `invalid --task-required: bad tool glob "[x"`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("bad glob through run: %v", err)
	}
	t.Setenv("TASKGATE_TASK", "a,[")
	if _, err := rulesFrom(t); err == nil || !strings.Contains(err.Error(), "invalid --task:") {
		t.Errorf("bad glob from the environment: %v", err)
	}
}
