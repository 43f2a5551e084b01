package main

import (
	"fmt"
	"math"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/upstream/stdio"
)

// budgetFlags bound each child of --upstream-command, and all of them
// (serve only; upstream/stdio/budget.go enforces them, Linux only).
func budgetFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "upstream-memory-limit", EnvVars: env("upstream-memory-limit"), Category: catUpstream,
			Usage: "stop a process of --upstream-command whose resident memory (its process group's, read from /proc every second) goes over `SIZE` (e.g. 256MiB); its session ends as after a crash (default: no limit; Linux)"},
		&cli.StringFlag{Name: "upstream-memory-total", EnvVars: env("upstream-memory-total"), Category: catUpstream,
			Usage: "while the processes of --upstream-command on this replica together hold more than `SIZE` resident, stop one each second: a warm one first, then one with no call in flight, whichever stop suffices (default: no limit; Linux)"},
		&cli.StringFlag{Name: "upstream-cpu-limit", EnvVars: env("upstream-cpu-limit"), Category: catUpstream,
			Usage: "stop a process of --upstream-command whose process group used more than `CORES` (e.g. 0.5) averaged over 10 s (default: no limit; Linux)"},
		&cli.IntFlag{Name: "upstream-open-files", EnvVars: env("upstream-open-files"), Category: catUpstream,
			Usage: "most files (descriptors, its stdio included) each process of --upstream-command may hold open: its RLIMIT_NOFILE, set as it starts (Linux)", DefaultText: "inherited"},
	}
}

// readBudget reads the budget flags into o.
func readBudget(c *cli.Context, o *stdio.Options) error {
	if c.Command.Name != "serve" {
		return nil
	}
	for _, f := range []struct {
		name string
		to   *int64
	}{{"upstream-memory-limit", &o.MemoryLimit}, {"upstream-memory-total", &o.MemoryTotal}} {
		if !c.IsSet(f.name) {
			continue
		}
		n, err := sizeFlag(c, f.name)
		if err != nil {
			return err
		}
		if n < 1<<20 {
			return fmt.Errorf("invalid --%s %q: at least 1MiB (a process needs more to start)", f.name, c.String(f.name))
		}
		*f.to = n
	}
	if o.MemoryTotal > 0 && o.MemoryLimit > o.MemoryTotal {
		return fmt.Errorf("invalid --upstream-memory-limit %q: over --upstream-memory-total %q", c.String("upstream-memory-limit"), c.String("upstream-memory-total"))
	}
	if s := c.String("upstream-cpu-limit"); c.IsSet("upstream-cpu-limit") {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return fmt.Errorf("invalid --upstream-cpu-limit %q: want a positive number of cores, such as 0.5 or 2", s)
		}
		o.CPULimit = v
	}
	if c.IsSet("upstream-open-files") {
		n := c.Int("upstream-open-files")
		if n < 8 {
			return fmt.Errorf("invalid --upstream-open-files %d: at least 8 (stdin, stdout, stderr and the runtime's own)", n)
		}
		o.OpenFiles = n
	}
	return nil
}
