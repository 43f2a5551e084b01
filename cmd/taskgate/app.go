package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version (or "devel") is reported.
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// run builds the CLI and runs it once. Errors come back as one line for
// main to print; usage errors never dump the help text.
func run(args []string, stdout, stderr io.Writer) error {
	app := &cli.App{
		Name:      "taskgate",
		Usage:     "give MCP Tasks to an unmodified MCP server",
		Version:   buildVersion(),
		Writer:    stdout,
		ErrWriter: stderr,
		// One-line errors: we print them in main.
		ExitErrHandler:       func(*cli.Context, error) {},
		HideHelpCommand:      true,
		OnUsageError:         usageError,
		EnableBashCompletion: true, // taskgate completion
		Commands: []*cli.Command{
			serveCommand(),
			toolsCommand(),
			healthcheckCommand(),
			completionCommand(),
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					_, err := fmt.Fprintln(c.App.Writer, "taskgate "+buildVersion())
					return err
				},
			},
		},
	}
	return app.Run(args)
}

var (
	badValue    = regexp.MustCompile(`^invalid value "(.*)" for flag -([\w-]+): `)
	unknownFlag = regexp.MustCompile(`^flag provided but not defined: -+([\w-]+)`)
)

// usageError turns urfave/cli's parse errors into one line that names the
// flag and what to fix, instead of a help dump.
func usageError(_ *cli.Context, err error, _ bool) error {
	msg := err.Error()
	if m := badValue.FindStringSubmatch(msg); m != nil {
		want := "a valid value"
		switch m[2] {
		case "shutdown-timeout", "default-ttl", "max-ttl", "poll-interval", "auto-after", "hybrid-wait", "drain-timeout", "latency-sync", "timeout", "mrtr-hold", "lease", "lease-renew", "keepalive", "read-timeout":
			want = "a duration such as 500ms, 30s or 2m"
		}
		return fmt.Errorf("invalid --%s %q: want %s", m[2], m[1], want)
	}
	if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("unknown flag --%s (see taskgate --help)", m[1])
	}
	return errors.New(msg + " (see taskgate --help)")
}
