package main

// taskgate's own defaults, read from the measured build's serve --help,
// so the projection uses the defaults of the binary it measured.

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// tgDefaults reads flag defaults and the lease grace from `taskgate serve
// --help`, so the projection uses the defaults of the binary measured.
type tgDefaults struct {
	lease, renew, ttl, maxTTL, grace time.Duration
	maxInflight                      int
}

// readDefaults runs tg serve --help and reads the defaults from it.
func readDefaults(tg string) (tgDefaults, error) {
	out, err := exec.Command(tg, "serve", "--help").CombinedOutput()
	if err != nil {
		return tgDefaults{}, fmt.Errorf("taskgate serve --help: %w", err)
	}
	help := helpEntries(string(out))
	def := func(flag string) string {
		if m := regexp.MustCompile(`\(default: ([^)]+)\)`).FindStringSubmatch(help[flag]); m != nil {
			return m[1]
		}
		return ""
	}
	var d tgDefaults
	var errs []error
	for _, x := range []struct {
		flag string
		to   *time.Duration
	}{{"lease", &d.lease}, {"lease-renew", &d.renew}, {"default-ttl", &d.ttl}, {"max-ttl", &d.maxTTL}} {
		v, err := time.ParseDuration(def(x.flag))
		errs = append(errs, err)
		*x.to = v
	}
	d.maxInflight, err = strconv.Atoi(def("max-inflight"))
	errs = append(errs, err)
	if m := regexp.MustCompile(`plus a (\S+) grace`).FindStringSubmatch(help["lease"]); m != nil {
		d.grace, _ = time.ParseDuration(m[1])
	}
	return d, errors.Join(errs...)
}

// helpEntries splits serve --help into one line per flag, keyed by its
// name: the flag's line and its wrapped description joined with single
// spaces (help wraps at 80 columns, even inside "(default: …)").
func helpEntries(help string) map[string]string {
	out := map[string]string{}
	cur := ""
	for _, l := range strings.Split(help, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && strings.HasPrefix(f[0], "--"):
			cur = strings.TrimPrefix(f[0], "--")
			out[cur] = strings.Join(f, " ")
		case len(f) > 0 && cur != "" && strings.HasPrefix(l, " "):
			out[cur] += " " + strings.Join(f, " ")
		default: // a blank line or a category heading ends the entry
			cur = ""
		}
	}
	return out
}
