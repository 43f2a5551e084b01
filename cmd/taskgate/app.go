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
			"taskgate COMMAND --help   (or taskgate help COMMAND)",
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
		if len(cmd.Flags) > 0 { // every command with flags: one layout, wrapped
			cmd.CustomHelpTemplate = commandHelp(cmd)
		}
	}
	app.Action = func(c *cli.Context) error {
		if !c.Args().Present() {
			return cli.ShowAppHelp(c)
		}
		name := c.Args().First()
		if name == "help" { // `taskgate help [COMMAND]`, as git and go have it
			return help(c)
		}
		var names []string
		for _, cmd := range app.VisibleCommands() {
			names = append(names, cmd.Names()...)
		}
		if s := didYouMean(name, names); s != "" {
			return fmt.Errorf("unknown command %q: did you mean %q? (see taskgate --help)", name, s)
		}
		return fmt.Errorf("unknown command %q (see taskgate --help)", name)
	}
	if err := missingValue(app.Commands, args); err != nil {
		return err
	}
	return app.Run(args)
}

var (
	badValue    = regexp.MustCompile(`^invalid value "(.*)" for flag -([\w-]+): `)
	unknownFlag = regexp.MustCompile(`^flag provided but not defined: -+([\w-]+)`)
	noArgument  = regexp.MustCompile(`^flag needs an argument: -+([\w-]+)`)
	badEnvValue = regexp.MustCompile(`^could not parse "(.*)" as \w+ value from environment variable "(\w+)" for flag ([\w-]+): `)
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
		return badValueError(flags, m[2], m[1])
	}
	if m := badEnvValue.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s (the environment's %s)", badValueError(flags, m[3], m[1]), m[2])
	}
	if m := noArgument.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("--%s needs a value (see %s)", m[1], see)
	}
	if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		if s := didYouMean(m[1], flagNames(flags)); s != "" {
			return fmt.Errorf("unknown flag --%s: did you mean --%s? (see %s)", m[1], s, see)
		}
		return fmt.Errorf("unknown flag --%s (see %s)", m[1], see)
	}
	return errors.New(msg + " (see " + see + ")")
}

// help is `taskgate help`: the app's help, or with a command's name that
// command's, as --help shows them.
func help(c *cli.Context) error {
	if c.Args().Len() < 2 {
		return cli.ShowAppHelp(c)
	}
	name := c.Args().Get(1)
	if c.App.Command(name) == nil {
		var names []string
		for _, cmd := range c.App.VisibleCommands() {
			names = append(names, cmd.Names()...)
		}
		if s := didYouMean(name, names); s != "" {
			return fmt.Errorf("no command %q to help with: did you mean %q? (see taskgate --help)", name, s)
		}
		return fmt.Errorf("no command %q to help with (see taskgate --help)", name)
	}
	return cli.ShowCommandHelp(c, name)
}
