// Command taskgate is a reverse proxy that gives MCP Tasks to an
// unmodified, synchronous MCP server. This package is wiring only: flags
// and environment variables become a gateway.Config.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	if err := run(os.Args, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "taskgate: "+err.Error())
		code := 1
		var ec cli.ExitCoder
		if errors.As(err, &ec) && ec.ExitCode() > 0 {
			code = ec.ExitCode() // taskgate call's outcome
		}
		os.Exit(code)
	}
}
