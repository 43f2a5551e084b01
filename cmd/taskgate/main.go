// Command taskgate is a reverse proxy that gives MCP Tasks to an
// unmodified, synchronous MCP server. This package is wiring only: flags
// and environment variables become a gateway.Config.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "taskgate: "+err.Error())
		os.Exit(1)
	}
}
