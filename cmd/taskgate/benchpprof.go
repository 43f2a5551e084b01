//go:build benchpprof

package main

// Built only with -tags benchpprof (go run ./bench -pprof does): serves
// net/http/pprof on $TASKGATE_BENCH_PPROF (a loopback address) so the
// benchmark can take heap, goroutine and CPU profiles of a running
// replica, and /debug/bench/gc, which reports the memory statistics before
// and after two forced collections (how much of the RSS is GC headroom and
// stack that a collection gives back). Normal builds do not contain it.

import (
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
)

func init() {
	addr := os.Getenv("TASKGATE_BENCH_PPROF")
	if addr == "" {
		return
	}
	http.HandleFunc("/debug/bench/gc", func(w http.ResponseWriter, r *http.Request) {
		line := func(when string) {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			// The stack size new goroutines start with (the runtime sets
			// it from the average stack it scanned last).
			start := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
			metrics.Read(start)
			fmt.Fprintf(w, "%s: rss_kib=%d heap_alloc=%d heap_inuse=%d heap_idle=%d heap_released=%d stack_inuse=%d stack_start=%d sys=%d next_gc=%d num_gc=%d goroutines=%d\n",
				when, rssKiB(), m.HeapAlloc, m.HeapInuse, m.HeapIdle, m.HeapReleased, m.StackInuse, start[0].Value.Uint64(), m.Sys, m.NextGC, m.NumGC, runtime.NumGoroutine())
		}
		line("before")
		runtime.GC()
		runtime.GC()
		line("after 2 GCs")
		debug.FreeOSMemory()
		line("after FreeOSMemory")
	})
	go func() { _ = http.ListenAndServe(addr, nil) }()
}

func rssKiB() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var n int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &n)
			return n
		}
	}
	return 0
}
