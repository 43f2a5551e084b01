package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/gateway"
	"github.com/taskgate/taskgate/policy"
)

// maxPolicyFile bounds the rules file: it is read again on every change.
const maxPolicyFile = 1 << 20

// policyFlags are the policy's flags; reloads says the command keeps
// running and reloads the rules file (serve), or reads it once (tools).
func policyFlags(reloads bool) []cli.Flag {
	usage := "rules `FILE` (JSON, or YAML named .yaml/.yml; see docs/policy.md); its rules come after --task/--task-required/--sync, first match wins"
	if reloads {
		usage += "; reloaded on SIGHUP and when it changes"
	}
	return []cli.Flag{
		&cli.StringFlag{Name: "policy", Category: catPolicy, EnvVars: env("policy"), Usage: usage},
		&cli.DurationFlag{Name: "auto-after", Category: catPolicy, Value: policy.DefaultAutoAfter, EnvVars: env("auto-after"),
			Usage: "a tool no rule matches becomes a task candidate once its learned p95 latency exceeds this"},
		&cli.DurationFlag{Name: "hybrid-wait", Category: catPolicy, Value: policy.DefaultHybridWait, EnvVars: env("hybrid-wait"),
			Usage: "how long a 2026-07-28 client's call of a no-rule tool is held before it becomes a task"},
	}
}

// latencySyncFlag sets how often replicas share learned latencies.
func latencySyncFlag() cli.Flag {
	return &cli.DurationFlag{Name: "latency-sync", Category: catPolicy, Value: gateway.DefaultLatencySync, EnvVars: env("latency-sync"),
		Usage: "how often this replica shares the tool latencies it learned through Redis (and reads the other replicas')"}
}

// policySource builds policy Configs: the rule flags and the durations,
// fixed at startup, then the rules of --policy, read again on each reload.
type policySource struct {
	file string
	base policy.Config // Rules holds the rule flags' rules only
}

// newPolicySource checks the policy flags; flagRules are the rule flags'.
func newPolicySource(c *cli.Context, flagRules policy.Rules) (*policySource, error) {
	for _, name := range []string{"auto-after", "hybrid-wait"} {
		if c.Duration(name) <= 0 {
			return nil, fmt.Errorf("invalid --%s %s: it must be positive", name, c.Duration(name))
		}
	}
	return &policySource{
		file: c.String("policy"),
		base: policy.Config{
			Rules:       flagRules,
			AutoAfter:   c.Duration("auto-after"),
			HybridWait:  c.Duration("hybrid-wait"),
			DefaultPoll: max(c.Duration("poll-interval"), 0),
		},
	}, nil
}

// read returns the rules file's content (nil without --policy).
func (s *policySource) read() ([]byte, error) {
	if s.file == "" {
		return nil, nil
	}
	f, err := os.Open(s.file)
	if err != nil {
		return nil, fmt.Errorf("cannot read --policy %s: %v", s.file, pathCause(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPolicyFile+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read --policy %s: %v", s.file, pathCause(err))
	}
	if len(data) > maxPolicyFile {
		return nil, fmt.Errorf("invalid --policy %s: larger than 1MiB", s.file)
	}
	return data, nil
}

// build returns the Config for the rules file's content data: the rule
// flags first, then the file's rules.
func (s *policySource) build(data []byte) (*policy.Config, error) {
	cfg := s.base
	if s.file == "" {
		return &cfg, nil
	}
	fileRules, err := policy.ParseRulesFile(s.file, data)
	if err != nil {
		return nil, fmt.Errorf("invalid --policy: %v", err)
	}
	cfg.Rules = append(append(make(policy.Rules, 0, len(s.base.Rules)+len(fileRules)), s.base.Rules...), fileRules...)
	return &cfg, nil
}

// pathCause is an os error without the path it repeats, e.g. "no such
// file or directory".
func pathCause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// policyCheckEvery is how often the rules file is checked for changes.
const policyCheckEvery = 2 * time.Second
