//go:build unix && !linux

package stdio

import "syscall"

// procAttr puts the child in a process group of its own.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
