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
		Name:  "taskgate",
		Usage: "give MCP Tasks to an unmodified MCP server",
		UsageText: "taskgate serve --upstream http://127.0.0.1:3000/mcp [flags]   (taskgate serve --help lists them)\n" +
			"taskgate COMMAND --help",
		Version:   buildVersion(),
		Writer:    stdout,
		ErrWriter: stderr,
		// One-line errors: we print them in main.
		ExitErrHandler:  func(*cli.Context, error) {},
		HideHelpCommand: true,
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageError("taskgate", c.App.Flags, err)
		},
		EnableBashCompletion: true, // taskgate completion
		Commands: []*cli.Command{
			serveCommand(),
			toolsCommand(),
			healthcheckCommand(),
			callCommand(),
			completionCommand(),
			flagsCommand(),
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
	for _, cmd := range app.Commands {
		cmd.OnUsageError = usageErrorOf(cmd)
		if cmd.Name == "serve" || cmd.Name == "call" {
			cmd.CustomHelpTemplate = commandHelp(cmd)
		}
	}
	app.Action = func(c *cli.Context) error {
		if !c.Args().Present() {
			return cli.ShowAppHelp(c)
		}
		name := c.Args().First()
		var names []string
		for _, cmd := range app.Commands {
			names = append(names, cmd.Names()...)
		}
		if s := didYouMean(name, names); s != "" {
			return fmt.Errorf("unknown command %q: did you mean %q? (see taskgate --help)", name, s)
		}
		return fmt.Errorf("unknown command %q (see taskgate --help)", name)
	}
	return app.Run(args)
}

var (
	badValue    = regexp.MustCompile(`^invalid value "(.*)" for flag -([\w-]+): `)
	unknownFlag = regexp.MustCompile(`^flag provided but not defined: -+([\w-]+)`)
)

// usageErrorOf is cmd's OnUsageError: usageError, with a misspelt flag
// matched against cmd's flags.
func usageErrorOf(cmd *cli.Command) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		return usageError("taskgate "+cmd.Name, cmd.Flags, err)
	}
}

// usageError turns urfave/cli's parse errors into one line that names the
// flag and what to fix, instead of a help dump.
func usageError(command string, flags []cli.Flag, err error) error {
	msg := err.Error()
	see := command + " --help"
	if m := badValue.FindStringSubmatch(msg); m != nil {
		want := "a valid value"
		switch m[2] {
		case "shutdown-timeout", "default-ttl", "max-ttl", "poll-interval", "auto-after", "hybrid-wait", "drain-timeout", "latency-sync", "timeout", "mrtr-hold", "lease", "lease-renew", "keepalive", "read-timeout", "rerun-backoff":
			want = "a duration such as 500ms, 30s or 2m"
		}
		return fmt.Errorf("invalid --%s %q: want %s", m[2], m[1], want)
	}
	if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		if s := didYouMean(m[1], flagNames(flags)); s != "" {
			return fmt.Errorf("unknown flag --%s: did you mean --%s? (see %s)", m[1], s, see)
		}
		return fmt.Errorf("unknown flag --%s (see %s)", m[1], see)
	}
	return errors.New(msg + " (see " + see + ")")
}
