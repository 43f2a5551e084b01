package main

// What /proc says about the processes the capacity mode started: the CPU
// time of their threads, their TCP connections to a port, and the local
// port range that bounds those connections.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// procCPU is the time pid's threads have run on a CPU, user and system,
// summed from /proc/PID/task/*/schedstat (nanoseconds); cpuTime
// (utime+stime, 10 ms ticks) when that cannot be read.
func procCPU(pid int) time.Duration {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return cpuTime(pid)
	}
	var s time.Duration
	for _, t := range ents {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return cpuTime(pid)
		}
		s += time.Duration(ns)
	}
	return s
}

func sumCPU(pids []int, f func(int) time.Duration) time.Duration {
	var s time.Duration
	for _, p := range pids {
		s += f(p)
	}
	return s
}

// connsTo counts pid's established TCP connections to port (on any
// address): its sockets (/proc/PID/fd) found in /proc/net/tcp and tcp6.
func connsTo(pid, port int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	inodes := map[string]bool{}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				inodes[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(l)
			if len(fs) < 10 || fs[3] != "01" || !inodes[fs[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(fs[2], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil && int(p) == port {
				n++
			}
		}
	}
	return n
}

// ephemeralPorts is the size of the local port range: the most connections
// one replica can hold open to one upstream address.
func ephemeralPorts() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	lo, _ := strconv.Atoi(f[0])
	hi, _ := strconv.Atoi(f[1])
	return hi - lo + 1
}
