package main

// Errors of flags given wrong: a flag whose value is missing, and a value
// that is not the number or duration the flag wants. Go's flag package,
// under urfave/cli, takes the word after a value flag as its value even
// when it is the next flag (`serve --upstream --task slow` sets
// --upstream to "--task" and leaves "slow" over), so the first is caught
// before parsing, by looking at the arguments.

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// missingValue finds, in the arguments of the command named by args[1],
// a value flag followed by another of that command's flags instead of its
// value: "--upstream needs a value; got the flag --task".
func missingValue(commands []*cli.Command, args []string) error {
	if len(args) < 2 {
		return nil
	}
	var cmd *cli.Command
	for _, c := range commands {
		if c.HasName(args[1]) {
			cmd = c
		}
	}
	if cmd == nil {
		return nil
	}
	rest := args[2:]
	for i := 0; i < len(rest)-1; i++ {
		if rest[i] == "--" {
			return nil
		}
		f := findFlag(cmd.Flags, rest[i])
		if f == nil || !takesValue(f) {
			continue
		}
		if next := findFlag(cmd.Flags, rest[i+1]); next != nil {
			return fmt.Errorf("%s needs a value; got the flag %s (see taskgate %s --help)", flagArgName(rest[i]), flagArgName(rest[i+1]), cmd.Name)
		}
		i++ // its value
	}
	return nil
}

// findFlag is the flag of flags that arg gives without "=value" (nil for
// anything else: a value, a positional argument, --name=value).
func findFlag(flags []cli.Flag, arg string) cli.Flag {
	if !strings.HasPrefix(arg, "-") || strings.Contains(arg, "=") {
		return nil
	}
	name := strings.TrimLeft(arg, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// flagArgName is arg as "--name", whether it was given with one dash or two.
func flagArgName(arg string) string {
	return "--" + strings.TrimLeft(arg, "-")
}

// takesValue reports whether f reads the next argument as its value.
func takesValue(f cli.Flag) bool {
	if _, ok := f.(*cli.BoolFlag); ok {
		return false
	}
	df, ok := f.(cli.DocGenerationFlag)
	return ok && df.TakesValue()
}

// wantOf says what a flag of f's type wants, for the message of a value
// it could not parse.
func wantOf(f cli.Flag) string {
	switch f.(type) {
	case *cli.IntFlag, *cli.Int64Flag, *cli.IntSliceFlag, *cli.Int64SliceFlag:
		return "a whole number"
	case *cli.UintFlag, *cli.Uint64Flag:
		return "a whole number, 0 or more"
	case *cli.Float64Flag, *cli.Float64SliceFlag:
		return "a number such as 10 or 0.5"
	case *cli.DurationFlag:
		return "a duration such as 500ms, 30s or 2m"
	case *cli.BoolFlag:
		return "true or false"
	}
	return "a valid value"
}

// badValueError is the message of value v that flag name (of flags)
// could not parse: `--max-inflight wants a whole number, got "lots"`.
func badValueError(flags []cli.Flag, name, v string) error {
	want := "a valid value"
	if f := findFlag(flags, "--"+name); f != nil {
		want = wantOf(f)
	}
	return fmt.Errorf("--%s wants %s, got %q", name, want, v)
}

// hostPortError says what is wrong with addr as the HOST:PORT of flag
// name (--listen, --metrics-listen, --console-listen), nil if nothing:
// a bare port gets the address to give instead.
func hostPortError(name, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return nil
	}
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		return fmt.Errorf("invalid --%s %s: want HOST:PORT, e.g. 127.0.0.1:%s (or :%s for every interface)", name, addr, addr, addr)
	}
	return fmt.Errorf("invalid --%s %q: want HOST:PORT, e.g. 127.0.0.1:8080 (or :8080 for every interface)", name, addr)
}
