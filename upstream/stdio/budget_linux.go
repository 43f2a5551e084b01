package stdio

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports (the kernel's ABI, whatever
// its internal HZ).
const clockTicks = 100

var pageSize = int64(os.Getpagesize())

func procReadable() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

func budgetSupported(*Options) error { return nil }

// setOpenFiles sets RLIMIT_NOFILE (soft and hard) of process pid.
func setOpenFiles(pid, n int) error {
	lim := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		return fmt.Errorf("prlimit RLIMIT_NOFILE %d on pid %d: %w", n, pid, err)
	}
	return nil
}

// readGroups sums the resident memory and CPU time of every process by
// its process group, from /proc/<pid>/stat (proc(5): pgrp is field 5,
// utime and stime 14 and 15, rss 24, in pages: VmRSS).
func readGroups() map[int]usage {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	groups := map[int]usage{}
	buf := make([]byte, 0, 1024)
	for _, e := range ents {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		f, err := os.Open("/proc/" + name + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		n, _ := f.Read(buf[:cap(buf)])
		f.Close()
		pgrp, u, ok := parseStat(buf[:n])
		if !ok {
			continue
		}
		g := groups[pgrp]
		g.rss += u.rss
		g.cpu += u.cpu
		groups[pgrp] = g
	}
	return groups
}

// parseStat reads the process group, rss and CPU ticks of one
// /proc/<pid>/stat line. The command name (field 2) may hold spaces and
// parentheses: the fields after it start after its last ')'.
func parseStat(b []byte) (pgrp int, u usage, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, u, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 22 { // state is field 3: field k is f[k-3]
		return 0, u, false
	}
	num := func(k int) int64 {
		v, err := strconv.ParseInt(string(f[k-3]), 10, 64)
		if err != nil {
			ok = false
		}
		return v
	}
	ok = true
	pgrp = int(num(5))
	u.cpu = num(14) + num(15)
	u.rss = num(24) * pageSize
	return pgrp, u, ok && u.rss >= 0
}
