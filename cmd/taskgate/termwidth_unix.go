//go:build unix

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// termWidth is the terminal's width in columns (TIOCGWINSZ), or 80.
func termWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 80
	}
	return int(ws.Col)
}
