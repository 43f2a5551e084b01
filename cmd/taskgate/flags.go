package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// env names the environment variable that also sets flag name.
func env(name string) []string {
	return []string{"TASKGATE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

// parseSize reads a byte count: a plain number, or a number with one of
// the suffixes B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(s), strings.ToUpper(u.suffix)) && (len(u.suffix) == 3 || !strings.HasSuffix(strings.ToUpper(s), "IB")) {
			mult = u.mult
			s = strings.TrimSpace(s[:len(s)-len(u.suffix)])
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("not a positive size")
	}
	return n * mult, nil
}

// sizeFlag reads flag name as a size, with a message that says how to fix it.
func sizeFlag(c *cli.Context, name string) (int64, error) {
	n, err := parseSize(c.String(name))
	if err != nil {
		return 0, fmt.Errorf("invalid --%s %q: want a byte size such as 4194304, 4MiB or 512KiB", name, c.String(name))
	}
	return n, nil
}

// The categories `serve --help` groups its flags under (urfave/cli
// Flag.Category), in the order a new user needs them. Every serve flag
// names one.
const (
	catUpstream      = "Upstream"
	catListen        = "Listening and TLS"
	catIdentity      = "Identity and sign-in"
	catPolicy        = "Policy"
	catTasks         = "Tasks and limits"
	catStore         = "Store"
	catFallback      = "Fallback and keep-alive"
	catWebhooks      = "Webhooks"
	catObservability = "Observability"
)

// categories are the flag categories in the order help shows them.
var categories = []string{catUpstream, catListen, catIdentity, catPolicy, catTasks, catStore, catFallback, catWebhooks, catObservability}
