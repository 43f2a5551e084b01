//go:build !linux

package stdio

import "errors"

const clockTicks = 100

func procReadable() bool { return false }

// budgetSupported refuses limits: they are read from /proc and set with
// prlimit, which only Linux has.
func budgetSupported(o *Options) error {
	if o.budgeted() {
		return errors.New("stdio: --upstream-memory-limit, --upstream-memory-total, --upstream-cpu-limit and --upstream-open-files need Linux (/proc and prlimit)")
	}
	return nil
}

func setOpenFiles(int, int) error { return errors.New("open-file limits need Linux") }

func readGroups() map[int]usage { return nil }
