package stdio

import "syscall"

// procAttr puts the child in a process group of its own (a Ctrl-C meant
// for the gateway does not reach it first: the bridge stops it in order),
// and has the kernel kill it if the gateway dies without stopping it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
