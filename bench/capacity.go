package main

// -mode capacity: what each operation of a task's life costs in Redis
// commands and in gateway CPU, what a task costs in Redis memory and in
// gateway memory, and, computed from those figures, what 1,000,000
// concurrent tasks and 50,000 polls/s would need (docs/CAPACITY.md). Four
// phases, each on its own processes over 127.0.0.1:
//
//	A  2026-07-28 (stateless upstream), one replica, one redis-server, no
//	   renewal, sweep or latency sync: create alone (a held task),
//	   create+finish (an echo task), polls of a working and of a completed
//	   task, an input round (the elicit tool), Redis bytes per completed
//	   task.
//	H  held tasks (slow tool, outliving the phase), one replica with a
//	   short --lease-renew: the idle replica, then lease renewals and
//	   sweeps per held task, Redis bytes and taskgate RSS per held task.
//	B  2025-11-25 (stateful upstream, one session): create+finish and the
//	   two polls.
//	C  a 3-master Redis Cluster and 3 replicas: create, poll, finish of
//	   held tasks round robin over the replicas, commands and bytes per
//	   task summed over the masters and per master, against A and H.
//
// Redis commands are counted with the slow log at 0 µs (redis_count.go)
// while the operations are sent one at a time; CPU (the run time of the
// processes' threads, checked against utime+stime) over separate batches
// at -concurrency with the slow log off, since logging every command
// costs Redis CPU of its own. Round trips are what taskgate itself counted
// (taskgate_store_command_duration_seconds: a pipeline is one). The
// projection (project) uses only these figures, taskgate's defaults as
// its serve --help prints them, and the plan* constants below.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Planning assumptions of the projection. These are inputs an operator
// chooses (or must find out about their own clients and hardware), not
// measurements; everything else the projection uses is measured in the run.
const (
	planTasks        = 1_000_000        // concurrent non-terminal tasks
	planPolls        = 50_000           // tasks/get per second, all clients together
	planLifetime     = 60 * time.Second // mean time from create to terminal: sets the creation rate
	planInputRounds  = 0.5              // mean input rounds (input_required → answer) per task
	planShortTTL     = 5 * time.Minute  // second scenario: --default-ttl and --max-ttl both this
	planShardMem     = 25 << 30         // used_memory one Redis shard may hold
	planShardOps     = 100_000          // commands per second one Redis shard may serve
	planShardCPU     = 0.5              // share of a shard's one main thread the load may take
	planMemHeadroom  = 1.3              // used_memory × this: fragmentation, replication and client buffers
	planReplicaCores = 4.0              // cores per gateway replica
	planReplicaUtil  = 0.6              // target CPU utilisation of a replica
	planReplicaMem   = 8 << 30          // memory per gateway replica
)

// Sizes of the measurement itself.
const (
	capHeldDefault   = 2000                    // held tasks in phase H unless -held is given
	capTasksPerOwner = 10                      // tasks per Authorization in the memory and cluster batches
	capCPUBatch      = 1500 * time.Millisecond // each timed CPU batch
	capCPURounds     = 3                       // phase A's CPU batches: rounds (the median is reported)
	capWindow        = 3 * time.Second         // the idle and renewal windows
	capHeldLease     = 3 * time.Second         // phase H: --lease
	capHeldRenew     = time.Second             // phase H: --lease-renew and --latency-sync
	capHoldSecs      = 600                     // phase H's held tasks: outlive the phase (taskgate is killed at its end)
	capClusterNodes  = 3                       // masters
	capClusterTasks  = 3000                    // tasks in the cluster check (and in phase A's memory batch)
	capClusterHold   = 30                      // seconds the cluster check's tasks run: polled working, then finish
	capClusterRenew  = 5 * time.Minute         // phase C: no renewal or sweep during the check (measured in H)
	capClusterLease  = 10 * time.Minute        // phase C: --lease
	capPollConc      = 8                       // CPU batch of input rounds: concurrent flows
	capSettle        = 150 * time.Millisecond
	capBigText       = 4096 // the echo text of the larger-result batch
	capBigTasks      = 1000
)

// capEnv is one phase's processes: an upstream, taskgate replicas, and the
// Redis node(s) they use.
type capEnv struct {
	c       *http.Client
	up      string   // upstream URL
	urls    []string // taskgate replicas
	metrics []string // their metrics URLs
	tgPIDs  []int
	nodes   []*redisServer
	rcs     []*redisCounter // one per node (the bench's own connection, not counted)
	ps      procs
	prefix  sync.Map // Authorization → its owner's key prefix (the bench's status reads)
}

func (e *capEnv) stop() {
	// taskgate first and by SIGKILL: a graceful stop fails (and logs) every
	// held task; then the upstream, then Redis.
	for _, pid := range e.tgPIDs {
		for _, c := range e.ps {
			if c.Process.Pid == pid {
				_ = c.Process.Kill()
			}
		}
	}
	e.ps.stopAll()
	for _, rc := range e.rcs {
		rc.close()
	}
	for _, n := range e.nodes {
		n.stop()
	}
}

// startCapEnv starts an upstream (stateless or not) and n taskgate
// replicas on the given Redis nodes; redisURL is what taskgate gets.
func startCapEnv(tg, tu string, nodes []*redisServer, redisURL string, stateless bool, n int, extra ...string) (*capEnv, error) {
	e := &capEnv{c: newClient(64), nodes: nodes}
	for _, nd := range nodes {
		e.rcs = append(e.rcs, newRedisCounter(nd.addr))
	}
	upAddr, _ := freeAddr()
	upArgs := []string{"--listen", upAddr}
	if stateless {
		upArgs = append(upArgs, "--stateless")
	}
	if err := e.ps.start(tu, upArgs...); err != nil {
		return e, err
	}
	e.up = "http://" + upAddr + "/mcp"
	addrs := []string{upAddr}
	for i := 0; i < n; i++ {
		a, _ := freeAddr()
		m, _ := freeAddr()
		args := append([]string{"serve", "--listen", a, "--upstream", e.up, "--redis-url", redisURL,
			"--metrics-listen", m, "--replica-id", fmt.Sprintf("capacity-%d-%d", os.Getpid(), i+1),
			"--max-tasks-per-owner", "-1", "--log-level", "error", "--drain-timeout", "1s", "--shutdown-timeout", "1s"},
			extra...)
		args = append(args, pollArgs(tg)...)
		if err := e.ps.start(tg, args...); err != nil {
			return e, err
		}
		e.tgPIDs = append(e.tgPIDs, e.ps[len(e.ps)-1].Process.Pid)
		e.urls = append(e.urls, "http://"+a+"/mcp")
		e.metrics = append(e.metrics, "http://"+m+"/metrics")
		addrs = append(addrs, a, m)
	}
	for _, a := range addrs {
		if err := waitTCP(a); err != nil {
			return e, err
		}
	}
	return e, nil
}

// ---- requests -------------------------------------------------------------

// capAuth is the Authorization of owner k of a group of owners.
func capAuth(group string, k int) string {
	return fmt.Sprintf("Bearer capacity-%s-%d", group, k)
}

// call2026 sends one 2026-07-28 request with the given Authorization.
func (e *capEnv) call2026(ctx context.Context, url, method, name, auth string, params map[string]any) (json.RawMessage, error) {
	p := map[string]any{"_meta": json.RawMessage(modernMetaJSON(true))}
	for k, v := range params {
		p[k] = v
	}
	h := modernHeader(method, name)
	h.Set("Authorization", auth)
	res, _, err := rpc(ctx, e.c, url, h, method, p)
	return res, err
}

func (e *capEnv) create2026(ctx context.Context, url, tool, auth string, args map[string]any) (string, error) {
	res, err := e.call2026(ctx, url, "tools/call", tool, auth, map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return "", err
	}
	var t mtask
	if json.Unmarshal(res, &t) != nil || t.ResultType != "task" || t.TaskID == "" {
		return "", fmt.Errorf("tools/call %s: want a CreateTaskResult, got %.300s", tool, res)
	}
	return t.TaskID, nil
}

func (e *capEnv) get2026(ctx context.Context, url, id, auth string) (mtask, error) {
	res, err := e.call2026(ctx, url, "tasks/get", id, auth, map[string]any{"taskId": id})
	if err != nil {
		return mtask{}, err
	}
	var t mtask
	if err := json.Unmarshal(res, &t); err != nil {
		return t, fmt.Errorf("tasks/get: %w: %.300s", err, res)
	}
	return t, nil
}

// pollLoad is a load request polling ids (client i polls ids[i%len]).
func pollLoad(ids []string, auth, want string) request {
	r := request{want: []byte(want)}
	for _, id := range ids {
		q, _ := json.Marshal(id)
		r.bodies = append(r.bodies, modernBody("tasks/get", `"taskId":`+string(q), true))
		h := modernHeader("tasks/get", id)
		h.Set("Authorization", auth)
		r.headers = append(r.headers, h)
	}
	return r
}

// parallel runs fn(i) on conc goroutines for i = 0, 1, …: n calls (n > 0)
// or until d has passed (n <= 0). It returns how many calls succeeded and
// the first error, after which it stops.
func parallel(ctx context.Context, conc, n int, d time.Duration, fn func(ctx context.Context, i int) error) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next, done atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if (n > 0 && i >= n) || (n <= 0 && time.Now().After(end)) {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if first == nil && n > 0 && int(done.Load()) < n {
		first = ctx.Err()
	}
	return int(done.Load()), first
}

// ---- what the gateway and Redis report ---------------------------------

// scrape reads one replica's Prometheus metrics: "name{labels}" → value.
func (e *capEnv) scrape(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out, sc.Err()
}

// metricSum sums the metrics whose name starts with prefix, over every
// replica.
func (e *capEnv) metricSum(ctx context.Context, prefix string) (float64, error) {
	var s float64
	for _, u := range e.metrics {
		m, err := e.scrape(ctx, u)
		if err != nil {
			return 0, err
		}
		for k, v := range m {
			if strings.HasPrefix(k, prefix) {
				s += v
			}
		}
	}
	return s, nil
}

const (
	mRoundTrips = "taskgate_store_command_duration_seconds_count"
	mLive       = "taskgate_tasks_live"
	mHeld       = "taskgate_held_calls"
)

// waitMetric waits (at most limit) until the sum of prefix over the
// replicas satisfies ok, then lets trailing commands land.
func (e *capEnv) waitMetric(ctx context.Context, prefix string, limit time.Duration, ok func(float64) bool) error {
	deadline := time.Now().Add(limit)
	for {
		v, err := e.metricSum(ctx, prefix)
		if err != nil {
			return err
		}
		if ok(v) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is still %g after %s", prefix, v, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(capSettle):
	}
	return nil
}

func (e *capEnv) waitIdle(ctx context.Context) error {
	return e.waitMetric(ctx, mLive, time.Minute, func(v float64) bool { return v == 0 })
}

// status reads a task's status straight from Redis on the bench's own
// (uncounted) connection of a single node: the hash key is found once per
// owner by SCAN (…:t:<id>), then built from that owner's prefix.
func (e *capEnv) status(ctx context.Context, auth, id string) (string, error) {
	rdb := e.rcs[0].rdb
	if p, ok := e.prefix.Load(auth); ok {
		st, err := rdb.HGet(ctx, p.(string)+":t:"+id, "status").Result()
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, redis.Nil) {
			return "", err
		}
	}
	keys, err := scanAll(ctx, rdb, "*:t:"+id)
	if err != nil || len(keys) == 0 {
		return "", err
	}
	e.prefix.Store(auth, strings.TrimSuffix(keys[0], ":t:"+id))
	return rdb.HGet(ctx, keys[0], "status").Result()
}

func (e *capEnv) waitStatus(ctx context.Context, auth, id, want string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := e.status(ctx, auth, id)
		if err != nil {
			return err
		}
		if st == want {
			return nil
		}
		if st != "" && st != "working" && st != "input_required" {
			return fmt.Errorf("task %s is %s, want %s", id, st, want)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("task %s still %q after 15s, want %s", id, st, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func scanAll(ctx context.Context, rdb *redis.Client, match string) ([]string, error) {
	var out []string
	var cur uint64
	for {
		keys, next, err := rdb.Scan(ctx, cur, match, 1000).Result()
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
		if cur = next; cur == 0 {
			return out, nil
		}
	}
}

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

// cpuCheck sums every CPU batch as procCPU and as cpuTime saw it, so the
// report can say how well the two agree.
var cpuCheck struct{ sched, ticks time.Duration }

func (e *capEnv) pids() []int {
	out := slices.Clone(e.tgPIDs)
	for _, n := range e.nodes {
		out = append(out, n.cmd.Process.Pid)
	}
	return out
}

func sumCPU(pids []int, f func(int) time.Duration) time.Duration {
	var s time.Duration
	for _, p := range pids {
		s += f(p)
	}
	return s
}

func (e *capEnv) tgCPU() time.Duration { return sumCPU(e.tgPIDs, procCPU) }

func (e *capEnv) redisCPU() time.Duration {
	var pids []int
	for _, n := range e.nodes {
		pids = append(pids, n.cmd.Process.Pid)
	}
	return sumCPU(pids, procCPU)
}

// memReading is one node's INFO memory: used_memory, and the part of it
// that is client buffers (mem_clients_normal: grows with connections and
// their buffers, not with tasks).
type memReading struct{ used, clients int64 }

// memSettle is how long the connections idle before a memory reading:
// Redis shrinks an idle client's query buffer after 2 s.
const memSettle = 2500 * time.Millisecond

// usedMemory reads INFO memory of each node, once the connections have
// idled for memSettle.
func (e *capEnv) usedMemory(ctx context.Context) ([]memReading, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(memSettle):
	}
	var out []memReading
	for _, rc := range e.rcs {
		// The slow log holds memory of its own: empty it first.
		if err := rc.rdb.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
			return nil, err
		}
		info, err := rc.rdb.Info(ctx, "memory").Result()
		if err != nil {
			return nil, err
		}
		var m memReading
		var n int
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
				m.used, err = strconv.ParseInt(v, 10, 64)
				n++
			}
			if v, ok := strings.CutPrefix(l, "mem_clients_normal:"); ok {
				m.clients, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if n != 1 || err != nil {
			return nil, fmt.Errorf("INFO memory of %s: no used_memory (%v)", rc.rdb.Options().Addr, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// ---- counted and CPU batches --------------------------------------------

// capCount is what one counted batch sent to Redis, on all nodes.
type capCount struct {
	n       int        // operations
	t       redisTally // slow log, every node
	perNode []int      // top-level commands per node
	subNode []int      // of which SUBSCRIBE and UNSUBSCRIBE
	global  int        // top-level commands on keys outside any owner's hash tag
	rtt     float64    // round trips taskgate counted
	tg      time.Duration
	el      time.Duration
	limit   int // the LIMIT count of the lease sweep's ZRANGEBYSCORE, if one ran
	// Top-level commands on the leases index ("ZADD XX" apart), their
	// execution time in the slow log (µs), and the entries ZADD XX named.
	leases   map[string]int
	leasesUS map[string]int64
	rescored int
}

// counted runs fn (which returns how many operations it made) with every
// node's slow log on.
func (e *capEnv) counted(ctx context.Context, fn func() (int, error)) (capCount, error) {
	var c capCount
	for _, rc := range e.rcs {
		if err := rc.begin(ctx); err != nil {
			return c, err
		}
	}
	r0, err := e.metricSum(ctx, mRoundTrips)
	if err != nil {
		return c, err
	}
	cpu0, t0 := e.tgCPU(), time.Now()
	n, err := fn()
	c.el, c.tg, c.n = time.Since(t0), e.tgCPU()-cpu0, n
	r1, err2 := e.metricSum(ctx, mRoundTrips)
	c.rtt = r1 - r0
	for _, rc := range e.rcs {
		logs, err3 := rc.endRaw(ctx)
		err2 = errors.Join(err2, err3, rc.rdb.Do(ctx, "SLOWLOG", "RESET").Err())
		t := tally(logs)
		c.t.add(t)
		c.perNode = append(c.perNode, t.topTotal())
		c.subNode = append(c.subNode, t.top["SUBSCRIBE"]+t.top["UNSUBSCRIBE"])
		c.unsharded(logs)
	}
	return c, errors.Join(err, err2)
}

// unsharded counts into c the top-level commands whose first key carries
// no hash tag (so it sits in one fixed Cluster slot whatever the owner),
// and apart those on the leases index, with the largest LIMIT count of a
// ZRANGEBYSCORE and the entries of each ZADD XX.
func (c *capCount) unsharded(logs []redis.SlowLog) {
	if c.leases == nil {
		c.leases, c.leasesUS = map[string]int{}, map[string]int64{}
	}
	for _, l := range logs {
		if len(l.Args) < 2 || l.ClientName == benchClientName || strings.HasPrefix(l.ClientAddr, "?") || l.ClientAddr == "" {
			continue
		}
		cmd := strings.ToUpper(l.Args[0])
		key := l.Args[1]
		if isScript(cmd) {
			if len(l.Args) < 4 || l.Args[2] == "0" {
				continue
			}
			key = l.Args[3]
		}
		switch cmd {
		case "SUBSCRIBE", "UNSUBSCRIBE", "PUBLISH", "PING", "CLIENT", "HELLO", "INFO":
			continue
		}
		if strings.Contains(key, "{") {
			continue
		}
		c.global++
		if !isLeasesKey(key) {
			continue
		}
		name := cmd
		switch {
		case cmd == "ZADD" && len(l.Args) > 2 && strings.EqualFold(l.Args[2], "XX"):
			name = "ZADD XX"
			// The slow log keeps 32 arguments, the last one then saying
			// how many more there were.
			argc, more := len(l.Args), 0
			if _, err := fmt.Sscanf(l.Args[argc-1], "... (%d more arguments)", &more); err == nil {
				argc += more - 1
			}
			if l.CommandArgc > 0 { // Redis 8.10 and later say it
				argc = int(l.CommandArgc)
			}
			c.rescored += (argc - 3) / 2
		case cmd == "ZRANGEBYSCORE":
			for i := 2; i+2 < len(l.Args); i++ {
				if strings.EqualFold(l.Args[i], "LIMIT") {
					if v, err := strconv.Atoi(l.Args[i+2]); err == nil {
						c.limit = max(c.limit, v)
					}
				}
			}
		}
		c.leases[name]++
		c.leasesUS[name] += l.Duration.Microseconds()
	}
}

// leasesTotal is the commands on the leases index and their execution time.
func (c capCount) leasesTotal() (n int, us int64) {
	for _, v := range c.leasesUS {
		us += v
	}
	return sumMap(c.leases), us
}

// isLeasesKey: the global leases index (taskstore's <prefix>:leases).
func isLeasesKey(k string) bool { return !strings.Contains(k, "{") && strings.HasSuffix(k, ":leases") }

// capCPU is one CPU batch: operations, taskgate and redis-server CPU.
type capCPU struct {
	n      int
	tg, rs time.Duration
	el     time.Duration
	rounds []capCPU // when the batch ran in rounds: each one
}

// add counts round r into c.
func (c *capCPU) add(r capCPU) {
	c.n += r.n
	c.tg += r.tg
	c.rs += r.rs
	c.el += r.el
	c.rounds = append(c.rounds, r)
}

// perOp is the CPU per operation: the median over the rounds (with the
// smallest and largest), or the whole batch's when it ran once.
func (c capCPU) perOp(f func(capCPU) time.Duration) (med, lo, hi float64) {
	if len(c.rounds) < 2 {
		v := float64(f(c).Nanoseconds()) / 1e3 / float64(max(c.n, 1))
		return v, -1, -1
	}
	var vs []float64
	for _, r := range c.rounds {
		vs = append(vs, float64(f(r).Nanoseconds())/1e3/float64(max(r.n, 1)))
	}
	slices.Sort(vs)
	return vs[len(vs)/2], vs[0], vs[len(vs)-1]
}

func (e *capEnv) cpuBatch(fn func() (int, error)) (capCPU, error) {
	tk0 := sumCPU(e.pids(), cpuTime)
	tg0, rs0, t0 := e.tgCPU(), e.redisCPU(), time.Now()
	n, err := fn()
	c := capCPU{n: n, tg: e.tgCPU() - tg0, rs: e.redisCPU() - rs0, el: time.Since(t0)}
	cpuCheck.ticks += sumCPU(e.pids(), cpuTime) - tk0
	cpuCheck.sched += c.tg + c.rs
	return c, err
}

// ---- key census -----------------------------------------------------------

var (
	uuidRe  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	tagRe   = regexp.MustCompile(`\{[0-9a-f]{16,}\}`)
	digitRe = regexp.MustCompile(`[0-9a-f]{24,}`)
)

// keyClass names a key with its ids and owner digests taken out:
// "tg:{<o>}:t:<id>".
func keyClass(k string) string {
	k = uuidRe.ReplaceAllString(k, "<id>")
	k = tagRe.ReplaceAllString(k, "{<o>}")
	return digitRe.ReplaceAllString(k, "<h>")
}

type classStat struct {
	keys    int
	members int64 // ZCARD, HLEN, SCARD, LLEN; 1 for a string
	bytes   int64 // MEMORY USAGE … SAMPLES 0
	pttl    int64 // the longest remaining time to live in the class, ms (-1: none)
}

type census map[string]*classStat

// takeCensus walks every key of every node: MEMORY USAGE, TYPE, PTTL and
// the member count, by class.
func (e *capEnv) takeCensus(ctx context.Context) ([]census, error) {
	var out []census
	for _, rc := range e.rcs {
		cs := census{}
		keys, err := scanAll(ctx, rc.rdb, "*")
		if err != nil {
			return nil, err
		}
		for len(keys) > 0 {
			chunk := keys[:min(len(keys), 500)]
			keys = keys[len(chunk):]
			pipe := rc.rdb.Pipeline()
			mem := make([]*redis.IntCmd, len(chunk))
			typ := make([]*redis.StatusCmd, len(chunk))
			ttl := make([]*redis.DurationCmd, len(chunk))
			for i, k := range chunk {
				mem[i] = pipe.MemoryUsage(ctx, k, 0)
				typ[i] = pipe.Type(ctx, k)
				ttl[i] = pipe.PTTL(ctx, k)
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				return nil, err
			}
			pipe = rc.rdb.Pipeline()
			cnt := make([]*redis.IntCmd, len(chunk))
			for i, k := range chunk {
				switch typ[i].Val() {
				case "zset":
					cnt[i] = pipe.ZCard(ctx, k)
				case "hash":
					cnt[i] = pipe.HLen(ctx, k)
				case "set":
					cnt[i] = pipe.SCard(ctx, k)
				case "list":
					cnt[i] = pipe.LLen(ctx, k)
				}
			}
			if pipe.Len() > 0 {
				if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
					return nil, err
				}
			}
			for i, k := range chunk {
				if typ[i].Val() == "none" { // expired meanwhile
					continue
				}
				c := keyClass(k)
				s := cs[c]
				if s == nil {
					s = &classStat{pttl: -1}
					cs[c] = s
				}
				s.keys++
				s.bytes += mem[i].Val()
				if cnt[i] != nil {
					s.members += cnt[i].Val()
				} else {
					s.members++
				}
				if d := ttl[i].Val(); d > 0 {
					s.pttl = max(s.pttl, d.Milliseconds())
				}
			}
		}
		out = append(out, cs)
	}
	return out, nil
}

// merged is the census of every node together.
func merged(cs []census) census {
	out := census{}
	for _, c := range cs {
		for k, s := range c {
			m := out[k]
			if m == nil {
				m = &classStat{pttl: -1}
				out[k] = m
			}
			m.keys += s.keys
			m.members += s.members
			m.bytes += s.bytes
			m.pttl = max(m.pttl, s.pttl)
		}
	}
	return out
}

// minus is after − before, class by class (the remaining time to live is
// after's).
func (c census) minus(before census) census {
	out := census{}
	for k, s := range c {
		b := before[k]
		if b == nil {
			b = &classStat{}
		}
		d := &classStat{keys: s.keys - b.keys, members: s.members - b.members, bytes: s.bytes - b.bytes, pttl: s.pttl}
		if d.keys != 0 || d.members != 0 || d.bytes != 0 {
			out[k] = d
		}
	}
	return out
}

func (c census) total() int64 {
	var s int64
	for _, v := range c {
		s += v.bytes
	}
	return s
}

// role finds the class of one of the store's keys by its shape.
func (c census) role(r string) (string, *classStat) {
	for k, s := range c {
		var ok bool
		switch r {
		case "task":
			ok = strings.HasSuffix(k, ":t:<id>")
		case "gone":
			ok = strings.HasSuffix(k, ":t:<id>:gone")
		case "created":
			ok = strings.HasSuffix(k, "}:created")
		case "active":
			ok = strings.HasSuffix(k, "}:active")
		case "leases":
			ok = isLeasesKey(k)
		}
		if ok {
			return k, s
		}
	}
	return "", &classStat{pttl: -1}
}

// ---- the cluster ------------------------------------------------------------

// startRedisNode starts redis-server like startRedis, with extra
// arguments, on a free port whose cluster bus port (+10000) is free too.
func startRedisNode(dir string, extra ...string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found in PATH (apt-get install -y redis-server)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		_, ps, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(ps)
		if port == 6379 || port+10000 > 65535 {
			continue
		}
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000))); err != nil {
			continue
		} else {
			l.Close()
		}
		logPath := filepath.Join(dir, "redis.log")
		cmd := exec.Command(bin, append([]string{"--port", ps, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--dir", dir, "--logfile", logPath}, extra...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		s := &redisServer{addr: addr, cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(s.exited) }()
		if err := waitTCP(addr); err != nil {
			s.stop()
			lastErr = fmt.Errorf("%w: %s", err, tail(logPath))
			continue
		}
		return s, nil
	}
	return nil, lastErr
}

// startCluster starts n cluster-enabled nodes and joins them with
// redis-cli --cluster create (--cluster-replicas 0), as an operator would.
func startCluster(ctx context.Context, dir string, n int) ([]*redisServer, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not found in PATH (apt-get install -y redis-server)")
	}
	var nodes []*redisServer
	fail := func(err error) ([]*redisServer, error) {
		for _, s := range nodes {
			s.stop()
		}
		return nil, err
	}
	var addrs []string
	for i := 0; i < n; i++ {
		s, err := startRedisNode(filepath.Join(dir, fmt.Sprintf("cluster-%d", i)),
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		if err != nil {
			return fail(err)
		}
		nodes = append(nodes, s)
		addrs = append(addrs, s.addr)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(cctx, cli, args...).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out))
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, ClientName: benchClientName, PoolSize: 1, Protocol: 2, DisableIdentity: true})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				return fail(fmt.Errorf("cluster did not become ok: %v %s", err, info))
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return nodes, nil
}

// slotsOf is how many hash slots each node serves (CLUSTER SLOTS).
func slotsOf(ctx context.Context, rdb *redis.Client, addrs []string) []int {
	out := make([]int, len(addrs))
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return out
	}
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			continue
		}
		for i, a := range addrs {
			if s.Nodes[0].Addr == a {
				out[i] += s.End - s.Start + 1
			}
		}
	}
	return out
}

// ---- taskgate's own defaults ---------------------------------------------

// tgDefaults reads flag defaults and the lease grace from `taskgate serve
// --help`, so the projection uses the defaults of the binary measured.
type tgDefaults struct {
	lease, renew, ttl, maxTTL, grace time.Duration
	maxInflight                      int
}

func readDefaults(tg string) (tgDefaults, error) {
	out, err := exec.Command(tg, "serve", "--help").CombinedOutput()
	if err != nil {
		return tgDefaults{}, fmt.Errorf("taskgate serve --help: %w", err)
	}
	help := helpEntries(string(out))
	def := func(flag string) string {
		if m := regexp.MustCompile(`\(default: ([^)]+)\)`).FindStringSubmatch(help[flag]); m != nil {
			return m[1]
		}
		return ""
	}
	var d tgDefaults
	var errs []error
	for _, x := range []struct {
		flag string
		to   *time.Duration
	}{{"lease", &d.lease}, {"lease-renew", &d.renew}, {"default-ttl", &d.ttl}, {"max-ttl", &d.maxTTL}} {
		v, err := time.ParseDuration(def(x.flag))
		errs = append(errs, err)
		*x.to = v
	}
	d.maxInflight, err = strconv.Atoi(def("max-inflight"))
	errs = append(errs, err)
	if m := regexp.MustCompile(`plus a (\S+) grace`).FindStringSubmatch(help["lease"]); m != nil {
		d.grace, _ = time.ParseDuration(m[1])
	}
	return d, errors.Join(errs...)
}

// helpEntries splits serve --help into one line per flag, keyed by its
// name: the flag's line and its wrapped description joined with single
// spaces (help wraps at 80 columns, even inside "(default: …)").
func helpEntries(help string) map[string]string {
	out := map[string]string{}
	cur := ""
	for _, l := range strings.Split(help, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && strings.HasPrefix(f[0], "--"):
			cur = strings.TrimPrefix(f[0], "--")
			out[cur] = strings.Join(f, " ")
		case len(f) > 0 && cur != "" && strings.HasPrefix(l, " "):
			out[cur] += " " + strings.Join(f, " ")
		default: // a blank line or a category heading ends the entry
			cur = ""
		}
	}
	return out
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

// ---- the phases -----------------------------------------------------------

type capA struct {
	life, lifeFirst, pollWork, pollDone, round, create capCount // counted batches
	lifeCPU, pollWorkCPU, pollDoneCPU, roundCPU        capCPU
	createCPU, firstCPU                                capCPU
	mem                                                capMem // completed tasks, capTasksPerOwner per owner
	oneOwner                                           census // every key, one owner with thousands of tasks
	resultBytes                                        int    // the echo result as tasks/get inlines it
	big                                                capMem // completed tasks with a capBigText-byte echo
	bigResultBytes                                     int
}

type capMem struct {
	n      int
	before []memReading
	after  []memReading
	delta  census // by class
	nodes  []census
}

// perTask is the used_memory delta per task, all nodes together, without
// client buffers (clientsPerTask), which follow the connections and what
// they last sent, not the tasks.
func (m capMem) perTask() float64 {
	var d int64
	for i := range m.after {
		d += (m.after[i].used - m.after[i].clients) - (m.before[i].used - m.before[i].clients)
	}
	return float64(d) / float64(max(m.n, 1))
}

// clientsPerTask is the part of perTask that is client buffers.
func (m capMem) clientsPerTask() float64 {
	var d int64
	for i := range m.after {
		d += m.after[i].clients - m.before[i].clients
	}
	return float64(d) / float64(max(m.n, 1))
}

func phaseA(ctx context.Context, o options, tg, tu, dir string) (*capA, error) {
	rs, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	// No lease renewal, sweep or latency sync during this phase: each is a
	// background cost of its own, measured in phase H.
	e, err := startCapEnv(tg, tu, []*redisServer{rs}, "redis://"+rs.addr, true, 1,
		"--task", "echo", "--task", "slow", "--task", "elicit", "--max-inflight", "20000",
		"--lease", capClusterLease.String(), "--lease-renew", capClusterRenew.String(), "--latency-sync", capClusterRenew.String())
	defer e.stop()
	if err != nil {
		return nil, err
	}
	a := &capA{}
	url := e.urls[0]
	auth := modernAuth
	echo := map[string]any{"text": "hello"}
	held := map[string]any{"seconds": capHoldSecs, "text": "x"}
	createEcho := func(ctx context.Context, i int) error {
		_, err := e.create2026(ctx, url, "echo", auth, echo)
		return err
	}
	createHeld := func(ctx context.Context, i int) error {
		_, err := e.create2026(ctx, url, "slow", auth, held)
		return err
	}
	// live is how many held tasks this phase has made so far: the others
	// are done once the live gauge is back to it.
	var live float64
	settle := func() error {
		return e.waitMetric(ctx, mLive, time.Minute, func(v float64) bool { return v <= live })
	}
	heldNow := func(n int) error {
		live += float64(n)
		return e.waitMetric(ctx, mHeld, time.Minute, func(v float64) bool { return v >= live })
	}
	// Warm up: scripts loaded, connections open at -concurrency, the
	// catalogue and the latency histograms seen once.
	if _, err := parallel(ctx, o.concurrency, 4*o.concurrency, 0, createEcho); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	for i := 0; i < 3; i++ {
		if err := e.inputRound(ctx, url, auth, fmt.Sprint("warm", i)); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	if err := settle(); err != nil {
		return nil, err
	}

	// Counted batches, one operation at a time.
	fmt.Fprintf(os.Stderr, "bench: capacity A: counting commands: create+finish, polls, create alone, input rounds\n")
	var ids []string
	if a.life, err = e.counted(ctx, func() (int, error) {
		for i := 0; i < o.countReqs; i++ {
			id, err := e.create2026(ctx, url, "echo", auth, echo)
			if err != nil {
				return i, err
			}
			ids = append(ids, id)
		}
		return len(ids), settle()
	}); err != nil {
		return nil, fmt.Errorf("create+finish: %w", err)
	}
	t, err := e.get2026(ctx, url, ids[0], auth)
	if err != nil {
		return nil, err
	}
	a.resultBytes = len(t.Result)
	// The first tasks/get of each completed task (nothing rendered yet).
	if a.lifeFirst, err = e.counted(ctx, func() (int, error) {
		for i, id := range ids[1:] {
			if _, err := e.get2026(ctx, url, id, auth); err != nil {
				return i, err
			}
		}
		return len(ids) - 1, nil
	}); err != nil {
		return nil, fmt.Errorf("first poll: %w", err)
	}
	nCreate := max(100, o.countReqs/2)
	if a.create, err = e.counted(ctx, func() (int, error) {
		for i := 0; i < nCreate; i++ {
			if err := createHeld(ctx, i); err != nil {
				return i, err
			}
		}
		return nCreate, heldNow(nCreate)
	}); err != nil {
		return nil, fmt.Errorf("create alone: %w", err)
	}
	heldID, err := e.create2026(ctx, url, "slow", auth, held)
	if err != nil {
		return nil, err
	}
	if err := heldNow(1); err != nil {
		return nil, err
	}
	done := pollLoad(ids[:min(o.tasks, len(ids))], auth, `"status":"completed"`)
	work := pollLoad([]string{heldID}, auth, `"status":"working"`)
	polls := []struct {
		req  request
		cnt  *capCount
		cpu  *capCPU
		what string
	}{{done, &a.pollDone, &a.pollDoneCPU, "poll of a completed task"}, {work, &a.pollWork, &a.pollWorkCPU, "poll of a working task"}}
	for _, p := range polls {
		if r := load(ctx, e.c, url, p.req, o.concurrency, 500*time.Millisecond, 0); r.requests == 0 || r.errors > 0 {
			return nil, fmt.Errorf("%s: warm-up: %d answers, %d errors: %s", p.what, r.requests, r.errors, firstErrText())
		}
		if *p.cnt, err = e.counted(ctx, func() (int, error) {
			r := load(ctx, e.c, url, p.req, 1, time.Minute, o.countReqs)
			return r.requests, errIf(r)
		}); err != nil {
			return nil, fmt.Errorf("%s: %w", p.what, err)
		}
	}
	rounds := max(20, o.countReqs/10)
	if a.round, err = e.counted(ctx, func() (int, error) {
		for i := 0; i < rounds; i++ {
			if err := e.inputRound(ctx, url, auth, fmt.Sprint("c", i)); err != nil {
				return i, err
			}
		}
		return rounds, settle()
	}); err != nil {
		return nil, fmt.Errorf("input round: %w", err)
	}
	// One owner with thousands of tasks: its indexes as they look after a
	// while (a large sorted set leaves the compact encoding).
	cs, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	a.oneOwner = cs[0]

	// Redis bytes per completed task: many owners, at -concurrency.
	fmt.Fprintf(os.Stderr, "bench: capacity A: Redis memory: %d echo tasks at c=%d, %d per owner\n", capClusterTasks, o.concurrency, capTasksPerOwner)
	a.mem.n = capClusterTasks
	if a.mem.before, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	before, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	memIDs := make([]string, capClusterTasks)
	memAuth := func(i int) string { return capAuth("mem", i/capTasksPerOwner) }
	if _, err := parallel(ctx, o.concurrency, capClusterTasks, 0, func(ctx context.Context, i int) error {
		var err error
		memIDs[i], err = e.create2026(ctx, url, "echo", memAuth(i), echo)
		return err
	}); err != nil {
		return nil, fmt.Errorf("memory batch: %w", err)
	}
	if err := settle(); err != nil {
		return nil, err
	}
	if a.mem.after, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	after, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	a.mem.delta = after[0].minus(before[0])

	// The same with a larger result: what each result byte costs.
	bigText := map[string]any{"text": strings.Repeat("x", capBigText)}
	a.big.n = capBigTasks
	if a.big.before, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	bigID := make([]string, capBigTasks)
	if _, err := parallel(ctx, o.concurrency, capBigTasks, 0, func(ctx context.Context, i int) error {
		var err error
		bigID[i], err = e.create2026(ctx, url, "echo", capAuth("big", i/capTasksPerOwner), bigText)
		return err
	}); err != nil {
		return nil, fmt.Errorf("large results: %w", err)
	}
	if err := settle(); err != nil {
		return nil, err
	}
	if a.big.after, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	if t, err = e.get2026(ctx, url, bigID[0], capAuth("big", 0)); err != nil {
		return nil, err
	}
	a.bigResultBytes = len(t.Result)

	// CPU, slow log off: every operation once per round, the rounds
	// interleaved so that what else the machine runs hits them alike.
	fmt.Fprintf(os.Stderr, "bench: capacity A: CPU, %d rounds at c=%d\n", capCPURounds, o.concurrency)
	nLife := capClusterTasks / capCPURounds
	for r := 0; r < capCPURounds; r++ {
		c, err := e.cpuBatch(func() (int, error) {
			n, err := parallel(ctx, o.concurrency, nLife, 0, func(ctx context.Context, i int) error {
				_, err := e.create2026(ctx, url, "echo", capAuth(fmt.Sprint("cpu", r), i/capTasksPerOwner), echo)
				return err
			})
			if err != nil {
				return n, err
			}
			return n, settle()
		})
		if err != nil {
			return nil, fmt.Errorf("create+finish at c=%d: %w", o.concurrency, err)
		}
		a.lifeCPU.add(c)
		if c, err = e.cpuBatch(func() (int, error) {
			if n, err := parallel(ctx, o.concurrency, nCreate, 0, createHeld); err != nil {
				return n, err
			}
			return nCreate, heldNow(nCreate)
		}); err != nil {
			return nil, fmt.Errorf("create alone at c=%d: %w", o.concurrency, err)
		}
		a.createCPU.add(c)
		for _, p := range polls {
			if c, err = e.cpuBatch(func() (int, error) {
				r := load(ctx, e.c, url, p.req, o.concurrency, capCPUBatch, 0)
				return r.requests, errIf(r)
			}); err != nil {
				return nil, fmt.Errorf("%s: %w", p.what, err)
			}
			p.cpu.add(c)
		}
		if c, err = e.cpuBatch(func() (int, error) {
			n, err := parallel(ctx, capPollConc, 0, capCPUBatch, func(ctx context.Context, i int) error {
				return e.inputRound(ctx, url, auth, fmt.Sprint("p", r, "-", i))
			})
			if err != nil {
				return n, err
			}
			return n, settle()
		}); err != nil {
			return nil, fmt.Errorf("input round: %w", err)
		}
		a.roundCPU.add(c)
		// The first tasks/get of completed tasks: a third of the memory
		// batch's each round.
		part := memIDs[r*nLife : (r+1)*nLife]
		if c, err = e.cpuBatch(func() (int, error) {
			return parallel(ctx, o.concurrency, len(part), 0, func(ctx context.Context, i int) error {
				t, err := e.get2026(ctx, url, part[i], memAuth(r*nLife+i))
				if err == nil && t.Status != "completed" {
					err = fmt.Errorf("task %s is %s", part[i], t.Status)
				}
				return err
			})
		}); err != nil {
			return nil, fmt.Errorf("first poll at c=%d: %w", o.concurrency, err)
		}
		a.firstCPU.add(c)
	}
	return a, nil
}

// inputRound is one elicit task: create, wait (reading Redis directly)
// until it asks, read the request with one tasks/get, answer it with
// tasks/update, wait until the worker finished.
func (e *capEnv) inputRound(ctx context.Context, url, auth, name string) error {
	id, err := e.create2026(ctx, url, "elicit", auth, map[string]any{})
	if err != nil {
		return err
	}
	if err := e.waitStatus(ctx, auth, id, "input_required"); err != nil {
		return err
	}
	t, err := e.get2026(ctx, url, id, auth)
	if err != nil {
		return err
	}
	if t.Status != "input_required" || len(t.InputRequests) != 1 {
		return fmt.Errorf("elicit task %s: %s with %d input requests", id, t.Status, len(t.InputRequests))
	}
	for key := range t.InputRequests {
		res, err := e.call2026(ctx, url, "tasks/update", id, auth, map[string]any{
			"taskId": id, "inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"name": name}}},
		})
		if err != nil {
			return err
		}
		if !strings.Contains(string(res), `"resultType":"complete"`) {
			return fmt.Errorf("tasks/update: %.300s", res)
		}
	}
	return e.waitStatus(ctx, auth, id, "completed")
}

type capH struct {
	held                int
	idle, renew         capCount
	idleWin, renewWin   time.Duration
	renewCPU            capCPU
	mem                 capMem
	createdIn           time.Duration
	rssBefore, rssAfter int64
	upConns             int // taskgate's established connections to the upstream, tasks held
	rssMax              int64
	leasesCard          int64   // leases index entries after the windows
	leasesDue           int64   // of which a sweep would read (score past now − grace)
	leasesLead          float64 // the lowest score − now, seconds
	lease, renewEvery   time.Duration
	// The renewal window split: the most frequent command is the renewal
	// script (one per held task per renewal), plus one ZADD XX per renewal
	// re-scoring the index; the sweeps are the ZRANGEBYSCORE calls and what
	// follows them.
	extendLabel string
	extendPer   float64 // renewal script calls per held task per renewal
	zaddPer     float64 // ZADD XX per renewal (one replica)
	rescoredPer float64 // entries they named, per held task per renewal
	usPerEntry  float64 // ZADD XX execution time (slow log) per entry named, µs
	sweeps      int     // ZRANGEBYSCORE calls in the window
	sweepPage   int     // their LIMIT count
	sweepReads  float64 // HMGET per sweep: candidates read
	sweepTidy   float64 // tidy script calls per sweep
	sweepCmds   float64 // every command per sweep, idle background taken out
	sweepLeases float64 // of which on the leases index
	sweepUS     float64 // their execution time (slow log), µs
}

func phaseH(ctx context.Context, o options, defs tgDefaults, tg, tu, dir string) (*capH, error) {
	h := &capH{held: capHeldDefault, lease: capHeldLease, renewEvery: capHeldRenew}
	if o.set["held"] {
		h.held = o.held
	}
	rs, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	e, err := startCapEnv(tg, tu, []*redisServer{rs}, "redis://"+rs.addr, true, 1,
		"--task", "slow", "--max-inflight", strconv.Itoa(h.held+1000),
		"--lease", capHeldLease.String(), "--lease-renew", capHeldRenew.String(), "--latency-sync", capHeldRenew.String())
	defer e.stop()
	if err != nil {
		return nil, err
	}
	url, pid := e.urls[0], e.tgPIDs[0]
	const createConc = 32
	// Warm up at the creation concurrency, so that connection pools and
	// their buffers are in the baseline.
	if _, err := parallel(ctx, createConc, 4*createConc, 0, func(ctx context.Context, i int) error {
		_, err := e.create2026(ctx, url, "slow", capAuth("warm", i/capTasksPerOwner), map[string]any{"seconds": 0.01, "text": "x"})
		return err
	}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := e.waitIdle(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: capacity H: idle window %s\n", capWindow)
	if h.idle, err = e.counted(ctx, func() (int, error) {
		select {
		case <-time.After(capWindow):
		case <-ctx.Done():
		}
		return 0, ctx.Err()
	}); err != nil {
		return nil, err
	}
	h.idleWin = h.idle.el
	if h.rssBefore, err = stableRSS(ctx, pid, 5*time.Second); err != nil {
		return nil, err
	}
	if h.mem.before, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	before, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: capacity H: creating %d held tasks at c=%d\n", h.held, createConc)
	h.mem.n = h.held
	t0 := time.Now()
	if _, err := parallel(ctx, createConc, h.held, 0, func(ctx context.Context, i int) error {
		_, err := e.create2026(ctx, url, "slow", capAuth("held", i/capTasksPerOwner), map[string]any{"seconds": capHoldSecs, "text": "x"})
		return err
	}); err != nil {
		return nil, fmt.Errorf("held tasks: %w", err)
	}
	if err := e.waitMetric(ctx, mHeld, 30*time.Second, func(v float64) bool { return v >= float64(h.held) }); err != nil {
		return nil, err
	}
	h.createdIn = time.Since(t0)
	created := time.Now()
	if u, err := neturl.Parse(e.up); err == nil {
		port, _ := strconv.Atoi(u.Port())
		h.upConns = connsTo(pid, port)
	}
	if h.rssAfter, err = stableRSS(ctx, pid, 10*time.Second); err != nil {
		return nil, err
	}
	h.rssMax = h.rssAfter
	if h.mem.after, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	after, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	h.mem.delta = after[0].minus(before[0])
	watch := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; {
			time.Sleep(250 * time.Millisecond)
			if r, err := rssKiB(pid); err == nil {
				h.rssMax = max(h.rssMax, r)
			}
		}
	}
	// Steady state: every held task renewed at least twice (its index
	// entry re-scored by the renewals), and past its first lease + grace.
	watch(time.Until(created.Add(capHeldLease + defs.grace + capHeldRenew)))
	fmt.Fprintf(os.Stderr, "bench: capacity H: renewal windows, 2 × %s\n", capWindow)
	if h.renew, err = e.counted(ctx, func() (int, error) { watch(capWindow); return 0, ctx.Err() }); err != nil {
		return nil, err
	}
	h.renewWin = h.renew.el
	if h.renewCPU, err = e.cpuBatch(func() (int, error) { watch(capWindow); return 0, ctx.Err() }); err != nil {
		return nil, err
	}
	if name, _ := after[0].role("leases"); name != "" {
		rdb, now := e.rcs[0].rdb, time.Now()
		h.leasesCard, _ = rdb.ZCard(ctx, name).Result()
		h.leasesDue, _ = rdb.ZCount(ctx, name, "-inf", strconv.FormatInt(now.Add(-defs.grace).UnixMilli(), 10)).Result()
		if z, err := rdb.ZRangeWithScores(ctx, name, 0, 0).Result(); err == nil && len(z) > 0 {
			h.leasesLead = (z[0].Score - float64(now.UnixMilli())) / 1e3
		}
	}
	if live, err := e.metricSum(ctx, mHeld); err != nil || live != float64(h.held) {
		return nil, fmt.Errorf("held tasks: %g held at the end of the windows, want %d (%v)", live, h.held, err)
	}
	// Split the renewal window.
	periods := h.renewWin.Seconds() / h.renewEvery.Seconds()
	top := h.renew.t.top
	for k, v := range top {
		if h.extendLabel == "" || v > top[h.extendLabel] {
			h.extendLabel = k
		}
	}
	h.extendPer = float64(top[h.extendLabel]) / (float64(h.held) * periods)
	zadd := h.renew.leases["ZADD XX"]
	h.zaddPer = float64(zadd) / periods
	h.rescoredPer = float64(h.renew.rescored) / (float64(h.held) * periods)
	h.usPerEntry = float64(h.renew.leasesUS["ZADD XX"]) / float64(max(h.renew.rescored, 1))
	h.sweeps = top["ZRANGEBYSCORE"]
	h.sweepPage = max(h.idle.limit, h.renew.limit)
	if h.sweeps > 0 {
		sw := float64(h.sweeps)
		idle := float64(h.idle.t.topTotal()) / h.idleWin.Seconds() * h.renewWin.Seconds()
		idleSweeps := float64(h.idle.t.top["ZRANGEBYSCORE"]) / h.idleWin.Seconds() * h.renewWin.Seconds()
		h.sweepReads = float64(top["HMGET"]) / sw
		h.sweepTidy = float64(h.renew.leases["EVALSHA"]) / sw
		// What is not renewal and not background, plus the sweep's own
		// ZRANGEBYSCORE (which the background also counts).
		h.sweepCmds = (float64(h.renew.t.topTotal()-top[h.extendLabel]-zadd) - idle + idleSweeps) / sw
		n, us := h.renew.leasesTotal()
		h.sweepLeases = float64(n-zadd) / sw
		h.sweepUS = float64(us-h.renew.leasesUS["ZADD XX"]) / sw
	}
	return h, nil
}

type capB struct {
	life, pollDone, pollWork          capCount
	lifeCPU, pollDoneCPU, pollWorkCPU capCPU
}

func phaseB(ctx context.Context, o options, tg, tu, dir string) (*capB, error) {
	rs, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	e, err := startCapEnv(tg, tu, []*redisServer{rs}, "redis://"+rs.addr, false, 1, "--task", "echo", "--task", "slow", "--max-inflight", "20000")
	defer e.stop()
	if err != nil {
		return nil, err
	}
	url := e.urls[0]
	sid, err := initSession(ctx, e.c, url)
	if err != nil {
		return nil, err
	}
	hdr := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {"2025-11-25"}}
	create := func(ctx context.Context, tool string, args map[string]any) (string, error) {
		res, _, err := rpc(ctx, e.c, url, hdr, "tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 3600000}})
		if err != nil {
			return "", err
		}
		var ctr struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		}
		if json.Unmarshal(res, &ctr) != nil || ctr.Task.TaskID == "" {
			return "", fmt.Errorf("tools/call %s as task: %.300s", tool, res)
		}
		return ctr.Task.TaskID, nil
	}
	echo := map[string]any{"text": "hello"}
	b := &capB{}
	if _, err := parallel(ctx, 4, 20, 0, func(ctx context.Context, i int) error { _, err := create(ctx, "echo", echo); return err }); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := e.waitIdle(ctx); err != nil {
		return nil, err
	}
	n := max(100, o.countReqs/2)
	fmt.Fprintf(os.Stderr, "bench: capacity B (2025-11-25): create+finish, %d echo tasks\n", n)
	var ids []string
	if b.life, err = e.counted(ctx, func() (int, error) {
		for i := 0; i < n; i++ {
			id, err := create(ctx, "echo", echo)
			if err != nil {
				return i, err
			}
			ids = append(ids, id)
		}
		return n, e.waitIdle(ctx)
	}); err != nil {
		return nil, err
	}
	if b.lifeCPU, err = e.cpuBatch(func() (int, error) {
		n, err := parallel(ctx, o.concurrency, 0, capCPUBatch, func(ctx context.Context, i int) error { _, err := create(ctx, "echo", echo); return err })
		if err != nil {
			return n, err
		}
		return n, e.waitIdle(ctx)
	}); err != nil {
		return nil, err
	}
	held, err := create(ctx, "slow", map[string]any{"seconds": capHoldSecs, "text": "x"})
	if err != nil {
		return nil, err
	}
	pollReq := func(ids []string, want string) request {
		r := request{header: hdr, want: []byte(want)}
		for _, id := range ids {
			q, _ := json.Marshal(id)
			r.bodies = append(r.bodies, `{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":`+strings.ReplaceAll(string(q), "%", "%%")+`}}`)
		}
		return r
	}
	for _, p := range []struct {
		req request
		cnt *capCount
		cpu *capCPU
	}{{pollReq(ids[:min(o.tasks, len(ids))], `"completed"`), &b.pollDone, &b.pollDoneCPU}, {pollReq([]string{held}, `"working"`), &b.pollWork, &b.pollWorkCPU}} {
		if r := load(ctx, e.c, url, p.req, o.concurrency, 500*time.Millisecond, 0); r.requests == 0 || r.errors > 0 {
			return nil, fmt.Errorf("2025-11-25 poll warm-up: %d answers, %d errors: %s", r.requests, r.errors, firstErrText())
		}
		if *p.cnt, err = e.counted(ctx, func() (int, error) {
			r := load(ctx, e.c, url, p.req, 1, time.Minute, o.countReqs)
			return r.requests, errIf(r)
		}); err != nil {
			return nil, err
		}
		if *p.cpu, err = e.cpuBatch(func() (int, error) {
			r := load(ctx, e.c, url, p.req, o.concurrency, capCPUBatch, 0)
			return r.requests, errIf(r)
		}); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func errIf(r result) error {
	if r.errors > 0 {
		return fmt.Errorf("%d errors: %s", r.errors, firstErrText())
	}
	return nil
}

type capC struct {
	n                                               int
	addrs                                           []string
	slots                                           []int
	create, pollWork, finish, pollFirst, pollRepeat capCount
	working                                         int // polled tasks that were still working
	memWork, memDone                                capMem
}

func phaseC(ctx context.Context, o options, tg, tu, dir string) (*capC, error) {
	nodes, err := startCluster(ctx, dir, capClusterNodes)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, nd := range nodes {
		addrs = append(addrs, nd.addr)
	}
	e, err := startCapEnv(tg, tu, nodes, "redis+cluster://"+strings.Join(addrs, ","), true, capClusterNodes,
		"--task", "slow", "--max-inflight", strconv.Itoa(capClusterTasks+1000),
		"--lease", capClusterLease.String(), "--lease-renew", capClusterRenew.String())
	defer e.stop()
	if err != nil {
		return nil, err
	}
	c := &capC{n: capClusterTasks, addrs: addrs, slots: slotsOf(ctx, e.rcs[0].rdb, addrs)}
	reps := len(e.urls)
	// Warm up every replica at the check's concurrency (pools, scripts on
	// every master), each task polled on another replica.
	if _, err := parallel(ctx, o.concurrency, 4*o.concurrency, 0, func(ctx context.Context, i int) error {
		id, err := e.create2026(ctx, e.urls[i%reps], "slow", capAuth("warm", i), map[string]any{"seconds": 0.01, "text": "x"})
		if err == nil {
			_, err = e.get2026(ctx, e.urls[(i+1)%reps], id, capAuth("warm", i))
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := e.waitIdle(ctx); err != nil {
		return nil, err
	}
	memBefore, err := e.usedMemory(ctx)
	if err != nil {
		return nil, err
	}
	censusBefore, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: capacity C: %d tasks over %d replicas and a %d-master cluster\n", c.n, reps, len(nodes))
	ids := make([]string, c.n)
	auth := func(i int) string { return capAuth("cluster", i/capTasksPerOwner) }
	t0 := time.Now()
	if c.create, err = e.counted(ctx, func() (int, error) {
		n, err := parallel(ctx, o.concurrency, c.n, 0, func(ctx context.Context, i int) error {
			id, err := e.create2026(ctx, e.urls[i%reps], "slow", auth(i), map[string]any{"seconds": capClusterHold, "text": "x"})
			ids[i] = id
			return err
		})
		if err != nil {
			return n, err
		}
		return n, e.waitMetric(ctx, mHeld, 30*time.Second, func(v float64) bool { return v >= float64(c.n) })
	}); err != nil {
		return nil, fmt.Errorf("cluster create: %w", err)
	}
	var working atomic.Int64
	if c.pollWork, err = e.counted(ctx, func() (int, error) {
		return parallel(ctx, o.concurrency, c.n, 0, func(ctx context.Context, i int) error {
			t, err := e.get2026(ctx, e.urls[(i+1)%reps], ids[i], auth(i))
			if t.Status == "working" {
				working.Add(1)
			}
			return err
		})
	}); err != nil {
		return nil, fmt.Errorf("cluster poll: %w", err)
	}
	c.working = int(working.Load())
	c.memWork = capMem{n: c.n, before: memBefore}
	if c.memWork.after, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	cw, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	for i := range cw {
		c.memWork.nodes = append(c.memWork.nodes, cw[i].minus(censusBefore[i]))
	}
	c.memWork.delta = merged(c.memWork.nodes)
	if el := time.Since(t0); el > capClusterHold*time.Second {
		return nil, fmt.Errorf("cluster check: creating, polling and counting took %s, longer than the tasks run (%ds): the machine is too slow for this check", el.Round(time.Second), capClusterHold)
	}
	fmt.Fprintf(os.Stderr, "bench: capacity C: waiting for the tasks to finish\n")
	if c.finish, err = e.counted(ctx, func() (int, error) {
		return c.n, e.waitMetric(ctx, mLive, 2*time.Minute, func(v float64) bool { return v == 0 })
	}); err != nil {
		return nil, fmt.Errorf("cluster finish: %w", err)
	}
	for k, cnt := range []*capCount{&c.pollFirst, &c.pollRepeat} {
		if *cnt, err = e.counted(ctx, func() (int, error) {
			return parallel(ctx, o.concurrency, c.n, 0, func(ctx context.Context, i int) error {
				t, err := e.get2026(ctx, e.urls[(i+2)%reps], ids[i], auth(i))
				if err == nil && t.Status != "completed" {
					err = fmt.Errorf("task %s is %s after it finished", ids[i], t.Status)
				}
				return err
			})
		}); err != nil {
			return nil, fmt.Errorf("cluster poll %d: %w", k+1, err)
		}
	}
	c.memDone = capMem{n: c.n, before: memBefore}
	if c.memDone.after, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	cd, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	for i := range cd {
		c.memDone.nodes = append(c.memDone.nodes, cd[i].minus(censusBefore[i]))
	}
	c.memDone.delta = merged(c.memDone.nodes)
	return c, nil
}

// ---- the mode -------------------------------------------------------------

func capacityBench(o options) error {
	if o.countReqs < 1 || o.tasks < 1 || o.concurrency < 1 {
		return errors.New("-count-requests, -tasks and -concurrency must be positive")
	}
	if o.set["held"] && o.held < 1 {
		return errors.New("-held must be positive")
	}
	if _, err := raiseNofile(); err != nil {
		return fmt.Errorf("raising RLIMIT_NOFILE: %w", err)
	}
	run, err := startModeRun()
	if err != nil {
		return err
	}
	defer run.close()
	ctx := run.ctx
	defs, err := readDefaults(run.tg)
	if err != nil {
		return err
	}
	loads := []string{"start " + run.load0}
	a, err := phaseA(ctx, o, run.tg, run.tu, run.dir)
	if err != nil {
		return fmt.Errorf("phase A (2026-07-28 operations): %w", err)
	}
	loads = append(loads, "after A "+loadAvg())
	h, err := phaseH(ctx, o, defs, run.tg, run.tu, run.dir)
	if err != nil {
		return fmt.Errorf("phase H (held tasks): %w", err)
	}
	loads = append(loads, "after H "+loadAvg())
	b, err := phaseB(ctx, o, run.tg, run.tu, run.dir)
	if err != nil {
		return fmt.Errorf("phase B (2025-11-25 operations): %w", err)
	}
	loads = append(loads, "after B "+loadAvg())
	c, err := phaseC(ctx, o, run.tg, run.tu, run.dir)
	if err != nil {
		return fmt.Errorf("phase C (cluster): %w", err)
	}
	loads = append(loads, "at end "+loadAvg())
	return emit(capacityReport(o, defs, a, h, b, c, loads, time.Since(run.t0)))
}

// ---- per-operation figures -------------------------------------------------

// capRow is one operation's cost per operation.
type capRow struct {
	name, how             string
	n                     int     // counted operations
	cmds, writes, scripts float64 // top-level commands, of which writes, commands run inside scripts
	rtt, global           float64 // taskgate's round trips; commands on unsharded keys
	kinds                 string
	cpuN, rounds          int
	tg, rs                float64 // µs per operation (the median of the rounds); < 0 not measured
	tgLo, tgHi            float64 // the rounds' smallest and largest taskgate CPU; < 0 none
}

func sumMap(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// row divides a counted batch by per and a CPU batch by its own count
// (cpuPer, if > 0, instead).
func row(name, how string, c capCount, per float64, cpu *capCPU, cpuPer float64, rsToo bool) capRow {
	r := capRow{name: name, how: how, n: c.n, tg: -1, rs: -1}
	r.cmds = float64(c.t.topTotal()) / per
	r.writes = float64(c.t.writes) / per
	r.scripts = float64(sumMap(c.t.inScript)) / per
	r.rtt = c.rtt / per
	r.global = float64(c.global) / per
	r.kinds = perCallF(c.t.top, per)
	r.tgLo, r.tgHi = -1, -1
	switch {
	case cpu != nil && cpuPer > 0:
		r.cpuN = int(cpuPer)
		r.tg = float64(cpu.tg.Nanoseconds()) / 1e3 / cpuPer
		if rsToo {
			r.rs = float64(cpu.rs.Nanoseconds()) / 1e3 / cpuPer
		}
	case cpu != nil:
		r.cpuN, r.rounds = cpu.n, len(cpu.rounds)
		r.tg, r.tgLo, r.tgHi = cpu.perOp(func(c capCPU) time.Duration { return c.tg })
		if rsToo {
			r.rs, _, _ = cpu.perOp(func(c capCPU) time.Duration { return c.rs })
		}
	default:
		r.tg = float64(c.tg.Microseconds()) / per
	}
	return r
}

// perCallF is perCall with a fractional divisor.
func perCallF(m map[string]int, per float64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys {
		v := float64(m[k]) / per
		if v < 0.005 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.3g", k, v))
	}
	if len(parts) == 0 {
		return "< 0.005 each"
	}
	return strings.Join(parts, ", ")
}

// minusRow is a − b: an operation measured as the difference of two.
func minusRow(name, how string, a, b capRow) capRow {
	r := capRow{name: name, how: how, kinds: "—", tg: -1, rs: -1, tgLo: -1, tgHi: -1}
	// A difference of two measured counts; a few thousandths below zero is
	// rounding, not a negative cost.
	d := func(x, y float64) float64 {
		v := x - y
		if v < 0 && v > -0.01 {
			return 0
		}
		return v
	}
	r.cmds, r.writes, r.scripts = d(a.cmds, b.cmds), d(a.writes, b.writes), d(a.scripts, b.scripts)
	r.rtt, r.global = d(a.rtt, b.rtt), d(a.global, b.global)
	if a.tg >= 0 && b.tg >= 0 {
		r.tg = a.tg - b.tg
	}
	if a.rs >= 0 && b.rs >= 0 {
		r.rs = a.rs - b.rs
	}
	return r
}

func f3(v float64) string {
	switch {
	case v < 0:
		return "—"
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func us(v float64) string {
	if v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f µs", v)
}

func bytesText(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1<<30:
		return fmt.Sprintf("%.1f GiB", v/(1<<30))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.2f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

func countText(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func writeRows(b *strings.Builder, rows []capRow) {
	fmt.Fprintf(b, "| operation | how measured | counted | Redis commands | of which writes | run inside scripts | round trips (taskgate) | on unsharded keys | commands by kind | taskgate CPU | redis-server CPU |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		n := "—"
		if r.n > 0 {
			n = strconv.Itoa(r.n)
		}
		cpuNote := ""
		switch {
		case r.cpuN > 0 && r.tg >= 0 && r.tgLo >= 0:
			cpuNote = fmt.Sprintf(" (%d in %d rounds: %.0f–%.0f)", r.cpuN, r.rounds, r.tgLo, r.tgHi)
		case r.cpuN > 0 && r.tg >= 0:
			cpuNote = fmt.Sprintf(" (%d)", r.cpuN)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s%s | %s |\n", r.name, r.how, n, f3(r.cmds), f3(r.writes), f3(r.scripts),
			f3(r.rtt), f3(r.global), r.kinds, us(r.tg), cpuNote, us(r.rs))
	}
}

func writeCensus(b *strings.Builder, cs census, per int) {
	keys := make([]string, 0, len(cs))
	for k := range cs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return cs[keys[i]].bytes > cs[keys[j]].bytes })
	fmt.Fprintf(b, "| key (ids and owner digests elided) | keys | members | MEMORY USAGE | per task | longest time to live left |\n|---|---|---|---|---|---|\n")
	for _, k := range keys {
		s := cs[k]
		ttl := "none"
		if s.pttl > 0 {
			ttl = (time.Duration(s.pttl) * time.Millisecond).Round(time.Second).String()
		}
		fmt.Fprintf(b, "| `%s` | %d | %d | %s | %s | %s |\n", k, s.keys, s.members, bytesText(float64(s.bytes)), bytesText(float64(s.bytes)/float64(max(per, 1))), ttl)
	}
	fmt.Fprintf(b, "| total | | | %s | %s | |\n", bytesText(float64(cs.total())), bytesText(float64(cs.total())/float64(max(per, 1))))
}

// ---- the projection -------------------------------------------------------

type capPlan struct {
	rate, pollsPerTask, workPolls, donePolls, renewals float64
	// Redis commands per second, by load.
	opsLife, opsRounds, opsPolls, opsRenew, opsSweep, opsIdle, opsTotal float64
	rsCPU                                                               float64 // redis-server cores
	// Gateway cores, by load.
	tgLife, tgRounds, tgPolls, tgRenew, tgTotal float64
	// Redis memory.
	memWork                                  float64 // per working task
	hashDone, gone, createdEntry, leaseEntry float64 // per completed task (MEMORY USAGE)
	calib                                    float64 // used_memory / MEMORY USAGE
	window                                   time.Duration
	scenTTL, scenMax                         [2]time.Duration
	memScen                                  [2]float64
	memParts                                 [2][4]float64 // working, completed hashes, tombstones, created-index ids
	perResultKiB                             float64       // used_memory per KiB of result, defaults' retention
	shardsMem, shardsOps, shardsCPU, shards  [2]int
	// Gateway replicas.
	rssPerHeld, sockPerHeld            float64
	ports                              int
	repCPU, repMem, repPorts, replicas int
	// The one-slot leases index: commands/s, of which per task, per
	// replica and renewal, and per sweep; entries re-scored/s; execution
	// time (slow log) in cores; its memory; one replica's ZADD XX.
	hotOps, hotTask, hotRenew, hotEntries, hotCores, hotMem, zaddMS float64
	opsIndex                                                        float64 // its re-scoring in the command budget
	hotShardOps, hotShardCPU                                        float64 // that shard's load: its even share and the index
}

// shardsFor is how many shards keep the one holding the leases index (hot
// of total, which the others share evenly) within budget; -1: none do.
func shardsFor(total, hot, budget float64) int {
	if hot >= budget {
		return -1
	}
	return ceilDiv(total-hot, budget-hot)
}

func ceilDiv(a, b float64) int {
	if b <= 0 {
		return 0
	}
	return int(math.Ceil(a / b))
}

// project computes what planTasks concurrent tasks and planPolls polls/s
// need, from the measured rows and the defaults of the build measured.
func project(defs tgDefaults, rows map[string]capRow, a *capA, h *capH) capPlan {
	var p capPlan
	p.rate = planTasks / planLifetime.Seconds()
	p.pollsPerTask = planPolls / p.rate
	// A client polls until it sees the terminal status: its last poll is of
	// a completed task this replica has not rendered yet, the others of a
	// working task.
	p.workPolls, p.donePolls = math.Max(p.pollsPerTask-1, 0), math.Min(p.pollsPerTask, 1)
	p.renewals = planTasks / defs.renew.Seconds()
	life, round, pw, pd, rn, idle := rows["life"], rows["round"], rows["pollWork"], rows["pollFirst"], rows["renew"], rows["idle"]

	// Gateway CPU, then the replica count (the per-replica costs need it).
	p.tgLife = p.rate * life.tg / 1e6
	p.tgRounds = p.rate * planInputRounds * round.tg / 1e6
	p.tgPolls = p.rate * (p.workPolls*pw.tg + p.donePolls*pd.tg) / 1e6
	p.tgRenew = p.renewals * rn.tg / 1e6
	p.tgTotal = p.tgLife + p.tgRounds + p.tgPolls + p.tgRenew
	p.rssPerHeld = float64(h.rssMax-h.rssBefore) * 1024 / float64(h.held)
	p.ports = ephemeralPorts()
	p.repCPU = ceilDiv(p.tgTotal, planReplicaCores*planReplicaUtil)
	p.repMem = ceilDiv(planTasks*p.rssPerHeld, planReplicaMem-float64(h.rssBefore)*1024)
	p.sockPerHeld = float64(h.upConns) / float64(h.held)
	p.repPorts = ceilDiv(planTasks*p.sockPerHeld, float64(p.ports))
	p.replicas = max(p.repCPU, p.repMem, p.repPorts, 1)
	reps := float64(p.replicas)

	// Redis commands and CPU.
	p.opsLife = p.rate * life.cmds
	p.opsRounds = p.rate * planInputRounds * round.cmds
	p.opsPolls = p.rate * (p.workPolls*pw.cmds + p.donePolls*pd.cmds)
	p.opsRenew = p.renewals * h.extendPer
	p.opsSweep = reps * h.sweepCmds / defs.renew.Seconds()
	p.opsIndex = reps * h.zaddPer / defs.renew.Seconds()
	p.opsIdle = reps * idle.cmds
	p.opsTotal = p.opsLife + p.opsRounds + p.opsPolls + p.opsRenew + p.opsSweep + p.opsIndex + p.opsIdle
	p.rsCPU = (p.rate*(life.rs+planInputRounds*round.rs+p.workPolls*pw.rs+p.donePolls*pd.rs) + p.renewals*rn.rs) / 1e6

	// The leases index: one key, so one slot and one shard. Its commands
	// (a ZADD at create, a ZREM at release; per replica and renewal one
	// ZADD XX naming every lease it renewed, and the sweeps) and their
	// execution time in the slow log, which leaves out reading and parsing
	// them: a lower bound of what they cost that shard's main thread.
	lc := func(c capCount) (n, us float64) {
		cn, cu := c.leasesTotal()
		return float64(cn) / float64(max(c.n, 1)), float64(cu) / float64(max(c.n, 1))
	}
	lifeN, lifeUS := lc(a.life)
	roundN, roundUS := lc(a.round)
	p.hotTask = lifeN + planInputRounds*math.Max(roundN-lifeN, 0)
	taskUS := lifeUS + planInputRounds*math.Max(roundUS-lifeUS, 0)
	p.hotRenew = h.zaddPer + h.sweepLeases
	p.hotOps = p.rate*p.hotTask + reps*p.hotRenew/defs.renew.Seconds()
	p.hotEntries = p.renewals * h.rescoredPer
	p.hotCores = (p.rate*taskUS + p.hotEntries*h.usPerEntry + reps*h.sweepUS/defs.renew.Seconds()) / 1e6
	p.zaddMS = planTasks / reps * h.rescoredPer * h.usPerEntry / 1e3

	// Redis memory. A working task: used_memory per held task (hash,
	// tombstone, index entries, channel). What a finished task leaves,
	// part by part for as long as each stays: the hash until ttl, the
	// tombstone until ttl + the expired window, the owner's created-index
	// entry until --max-ttl; MEMORY USAGE of each, scaled to used_memory by
	// the measured ratio. Its leases index entry is gone (Release).
	p.memWork = h.mem.perTask()
	d := a.mem.delta
	n := float64(a.mem.n)
	_, task := d.role("task")
	_, gone := d.role("gone")
	_, crd := d.role("created")
	_, cr := a.oneOwner.role("created")
	_, ls := a.oneOwner.role("leases")
	p.hashDone, p.gone = float64(task.bytes)/n, float64(gone.bytes)/n
	p.createdEntry = float64(cr.bytes) / float64(max(cr.members, 1))
	p.leaseEntry = float64(ls.bytes) / float64(max(ls.members, 1))
	p.calib = a.mem.perTask() * n / float64(max(d.total(), 1))
	p.window = (time.Duration(gone.pttl-task.pttl) * time.Millisecond).Round(time.Minute)
	p.scenTTL = [2]time.Duration{(time.Duration(task.pttl) * time.Millisecond).Round(time.Minute), planShortTTL}
	p.scenMax = [2]time.Duration{(time.Duration(crd.pttl) * time.Millisecond).Round(time.Minute), planShortTTL}
	for i := range p.memScen {
		t, mx, L := p.scenTTL[i].Seconds(), p.scenMax[i].Seconds(), planLifetime.Seconds()
		p.memParts[i] = [4]float64{planTasks * p.memWork, p.rate * p.calib * math.Max(t-L, 0) * p.hashDone,
			p.rate * p.calib * math.Max(t+p.window.Seconds()-L, 0) * p.gone, p.rate * p.calib * math.Max(mx-L, 0) * p.createdEntry}
		p.memScen[i] = p.memParts[i][0] + p.memParts[i][1] + p.memParts[i][2] + p.memParts[i][3]
		p.shardsMem[i] = ceilDiv(p.memScen[i]*planMemHeadroom, planShardMem)
		// The shard holding the leases index takes its even share of the
		// rest and all of the index: enough shards that it fits.
		p.shardsOps[i] = shardsFor(p.opsTotal, p.hotOps, planShardOps)
		p.shardsCPU[i] = shardsFor(p.rsCPU, p.hotCores, planShardCPU)
		p.shards[i] = max(p.shardsMem[i], p.shardsOps[i], p.shardsCPU[i], 1)
		if p.shardsOps[i] < 0 || p.shardsCPU[i] < 0 {
			p.shards[i] = -1
		}
	}
	p.hotMem = planTasks * p.leaseEntry
	sh := float64(max(p.shards[0], 1))
	p.hotShardOps = p.opsTotal/sh + p.hotOps*(1-1/sh)
	p.hotShardCPU = p.rsCPU/sh + p.hotCores*(1-1/sh)
	// A result byte costs slope bytes (measured) for as long as the hash
	// stays: the working life and the rest of the ttl.
	slope := (a.big.perTask() - a.mem.perTask()) / float64(a.bigResultBytes-a.resultBytes)
	p.perResultKiB = slope * 1024 * (planTasks + p.rate*math.Max(p.scenTTL[0].Seconds()-planLifetime.Seconds(), 0))
	return p
}

// ---- the report -------------------------------------------------------------

// scriptBody is how many commands a script label ("EVALSHA[HMGET HSET]")
// ran.
func scriptBody(label string) int {
	_, body, ok := strings.Cut(label, "[")
	if !ok {
		return 0
	}
	return len(strings.Fields(strings.TrimSuffix(body, "]")))
}

func capacityReport(o options, defs tgDefaults, a *capA, h *capH, b *capB, c *capC, loads []string, wall time.Duration) string {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	w("## Capacity: cost per operation, per task, and a projection\n\n")
	rev := "unknown"
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		rev = strings.TrimSpace(string(out))
	}
	if alt := os.Getenv("BENCH_TASKGATE_BIN"); alt != "" {
		rev += " (taskgate itself: BENCH_TASKGATE_BIN=" + alt + ")"
	}
	w("%s, taskgate from the checkout at %s. Machine: %s; nproc %d. %s (no persistence, loopback). Load average (1/5/15 min): %s. Wall time %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), rev, machine(), nproc(), versionOf("redis-server", "--version"), strings.Join(loads, "; "), wall.Round(time.Second))
	w("Every figure is measured in this run, on processes over 127.0.0.1; only the planning assumptions of the projection are chosen. ")
	w("Redis commands: every node's slow log at 0 µs while the operations are sent one at a time; a script call is one command, what it runs inside is counted apart. ")
	w("Round trips: taskgate's own count (taskgate_store_command_duration_seconds; a pipeline is one). ")
	w("CPU: the run time of taskgate's and redis-server's threads (/proc/PID/task/*/schedstat, ns) over separate batches at c=%d (input rounds: c=%d) with the slow log off, divided by the operations; phase A's batches ran in %d interleaved rounds, and the table gives the median round with the operations in all rounds and the rounds' range in parentheses. Over all CPU batches, utime+stime from /proc/PID/stat (10 ms ticks) came to %s of the schedstat figure. ",
		o.concurrency, capPollConc, capCPURounds, ratioF(float64(cpuCheck.ticks), float64(cpuCheck.sched)))
	w("\"Unsharded\": commands on a key without an owner hash tag, which a Cluster puts on one shard whatever its size.\n\n")

	rows := map[string]capRow{}
	rows["life"] = row("create + finish (echo task)", "tools/call echo → task, the worker's upstream call, result stored", a.life, float64(a.life.n), &a.lifeCPU, 0, true)
	rows["create"] = row("create alone", "tools/call slow → task, until the worker holds its upstream call", a.create, float64(a.create.n), &a.createCPU, 0, true)
	rows["finish"] = minusRow("finish", "create + finish − create", rows["life"], rows["create"])
	rows["pollWork"] = row("tasks/get, working task", "one task, again and again", a.pollWork, float64(a.pollWork.n), &a.pollWorkCPU, 0, true)
	rows["pollFirst"] = row("tasks/get, completed task, first time", "each completed task once", a.lifeFirst, float64(a.lifeFirst.n), &a.firstCPU, 0, true)
	rows["pollRepeat"] = row("tasks/get, completed task, again", fmt.Sprintf("%d completed tasks, again and again", o.tasks), a.pollDone, float64(a.pollDone.n), &a.pollDoneCPU, 0, true)
	elicit := row("elicit task", "create; wait (reading Redis) for input_required; tasks/get; tasks/update; wait for completed", a.round, float64(a.round.n), &a.roundCPU, 0, true)
	rows["round"] = minusRow("one input round", "elicit task − create + finish", elicit, rows["life"])
	periods := h.renewWin.Seconds() / h.renewEvery.Seconds()
	cpuPeriods := h.renewCPU.el.Seconds() / h.renewEvery.Seconds()
	rn := row("lease renewal, per held task", fmt.Sprintf("%d held tasks, %s window, --lease-renew %s", h.held, capWindow, h.renewEvery),
		h.renew, float64(h.held)*periods, &h.renewCPU, float64(h.held)*cpuPeriods, true)
	// The renewal script and the replica's one ZADD XX per renewal; the
	// sweeps are the next row.
	zx := h.zaddPer / float64(h.held)
	rn.cmds, rn.writes, rn.scripts = h.extendPer+zx, h.extendPer+zx, h.extendPer*float64(scriptBody(h.extendLabel))
	rn.rtt, rn.global = -1, zx
	rn.kinds = fmt.Sprintf("%s %.3g; per replica and renewal ZADD XX %.3g, re-scoring %.3g index entries per held task, %.2f µs each (slow log); one pipeline per replica per renewal",
		h.extendLabel, h.extendPer, h.zaddPer, h.rescoredPer, h.usPerEntry)
	rows["renew"] = rn
	sweep := capRow{name: "lease sweep, per sweep", how: fmt.Sprintf("the same window: %d sweeps, background taken out", h.sweeps), cmds: h.sweepCmds, global: h.sweepLeases,
		writes: -1, scripts: -1, rtt: -1, tg: -1, rs: -1, tgLo: -1, tgHi: -1,
		kinds: fmt.Sprintf("ZRANGEBYSCORE LIMIT %d, HMGET %.3g (candidates read), tidy script %.3g", h.sweepPage, h.sweepReads, h.sweepTidy)}
	idle := row("idle replica, per second", fmt.Sprintf("no task, %s window, --lease-renew and --latency-sync %s", capWindow, h.renewEvery), h.idle, h.idleWin.Seconds(), nil, 0, false)
	idle.tg = float64(h.idle.tg.Microseconds()) / h.idleWin.Seconds()
	rows["idle"] = idle

	w("### Per operation (2026-07-28 client, stateless upstream, one replica, one redis-server)\n\n")
	w("The echo result, as tasks/get inlines it, is %d bytes. Renewal, sweep and latency sync were off for the operations above the renewal row (--lease-renew %s); those rows come from a replica with %d held tasks and --lease-renew %s, --lease %s, once every held task had been renewed at least twice.\n\n",
		a.resultBytes, capClusterRenew, h.held, h.renewEvery, h.lease)
	writeRows(&sb, []capRow{rows["create"], rows["finish"], rows["life"], rows["pollWork"], rows["pollFirst"], rows["pollRepeat"], elicit, rows["round"], rn, sweep, idle})
	w("\n- Finish and input round are differences of measured rows. An input round includes the one tasks/get that shows the client the request.\n")
	w("- Renewal: commands per held task per renewal do not depend on --lease-renew; the CPU row is the whole replica's CPU in the window divided by held tasks × renewals, so it includes the sweeps and the runtime's cost of keeping %d tasks.\n", h.held)
	w("- Sweep: every --lease-renew on every replica, %d index entries per page (the ZRANGEBYSCORE LIMIT taskgate sends). After the windows the leases index held %d entries for %d held tasks, %d of them with a score a sweep would read (past now − %s); the lowest score lay %.1f s ahead of now.\n",
		h.sweepPage, h.leasesCard, h.held, h.leasesDue, defs.grace, h.leasesLead)
	_, lsDone := a.mem.delta.role("leases")
	w("- Leases index commands per create + finish: %s. Entries %d finished tasks left in it: %d (phase A's memory batch).\n\n", perCallF(a.life.leases, float64(a.life.n)), a.mem.n, lsDone.members)

	lrows := []capRow{
		row("create + finish (echo task)", "one session", b.life, float64(b.life.n), &b.lifeCPU, 0, true),
		row("tasks/get, working task", "one task, again and again", b.pollWork, float64(b.pollWork.n), &b.pollWorkCPU, 0, true),
		row("tasks/get, completed task, again", fmt.Sprintf("%d completed tasks, again and again", o.tasks), b.pollDone, float64(b.pollDone.n), &b.pollDoneCPU, 0, true),
	}
	w("### The same for a 2025-11-25 client (one session, stateful upstream)\n\n")
	writeRows(&sb, lrows)
	w("\nNot repeated here: the input round (a 2025-11-25 client gets the request on its tasks/result stream), renewals and sweeps (the runner's, the same for both).\n\n")

	w("### Redis memory per task\n\n")
	w("INFO used_memory before and after, less client buffers (mem_clients_normal, shown apart: they follow the connections, not the tasks), divided by the tasks; connection pools warmed to the batch's concurrency first, the slow log emptied and the connections idle for %s before each reading; %d tasks per Authorization. ", memSettle, capTasksPerOwner)
	w("The key tables are MEMORY USAGE … SAMPLES 0 of every key, after minus before, by key shape.\n\n")
	w("| tasks | state | used_memory delta, less client buffers | **per task** | client buffers, per task | MEMORY USAGE per task |\n|---|---|---|---|---|---|\n")
	for _, m := range []struct {
		what string
		m    capMem
	}{{"working, held (phase H)", h.mem}, {fmt.Sprintf("completed, %d-byte result (phase A)", a.resultBytes), a.mem}} {
		w("| %d | %s | %s | **%s** | %s | %s |\n", m.m.n, m.what, bytesText(m.m.perTask()*float64(m.m.n)), bytesText(m.m.perTask()), bytesText(m.m.clientsPerTask()), bytesText(float64(m.m.delta.total())/float64(m.m.n)))
	}
	w("| %d | completed, %d-byte result (phase A) | %s | **%s** | %s | — |\n", a.big.n, a.bigResultBytes, bytesText(a.big.perTask()*float64(a.big.n)), bytesText(a.big.perTask()), bytesText(a.big.clientsPerTask()))
	slope := (a.big.perTask() - a.mem.perTask()) / float64(a.bigResultBytes-a.resultBytes)
	w("\nEach byte of result costs %.2f bytes of Redis memory (the two completed rows), kept for the task's ttl.\n", slope)
	w("\nCompleted tasks, by key:\n\n")
	writeCensus(&sb, a.mem.delta, a.mem.n)
	w("\nWorking (held) tasks, by key:\n\n")
	writeCensus(&sb, h.mem.delta, h.mem.n)
	_, cr := a.oneOwner.role("created")
	_, ls := a.oneOwner.role("leases")
	w("\nLarge sorted sets (phase A's one Authorization, which made thousands of tasks): its created index, %d ids in %s, **%.0f B per id**; the global leases index, %d entries in %s, **%.0f B per entry**. Past 128 members a sorted set leaves its compact encoding; an owner's created index keeps every id for --max-ttl.\n\n",
		cr.members, bytesText(float64(cr.bytes)), float64(cr.bytes)/float64(max(cr.members, 1)), ls.members, bytesText(float64(ls.bytes)), float64(ls.bytes)/float64(max(ls.members, 1)))

	w("### Gateway memory per held task\n\n")
	w("taskgate VmRSS with %d held tasks (phase H, created in %s): before %s, settled %s, largest over the following %s %s: **%s per held task** (largest), %s settled. (The scale mode watches for longer and with more tasks.)\n\n",
		h.held, h.createdIn.Round(time.Millisecond), mib(h.rssBefore), mib(h.rssAfter), (capHeldLease + defs.grace + capHeldRenew + 2*capWindow).Round(time.Second), mib(h.rssMax),
		bytesText(float64(h.rssMax-h.rssBefore)*1024/float64(h.held)), bytesText(float64(h.rssAfter-h.rssBefore)*1024/float64(h.held)))

	p := project(defs, rows, a, h)
	w("### Projection: %s concurrent tasks, %s polls/s\n\n", countText(planTasks), countText(planPolls))
	w("Planning assumptions (constants in bench/capacity.go; change them there): mean task lifetime %s, so %s tasks created and finished per second; %.2g input rounds per task; a client polls until it sees the result, so %.2f polls per task, the last one of a completed task not yet rendered by that replica. ",
		planLifetime, countText(p.rate), planInputRounds, p.pollsPerTask)
	w("A Redis shard may hold %s of used_memory, serve %s commands/s and spend %.0f%% of its one main thread; used_memory × %.1f for fragmentation and buffers. A gateway replica has %.0f cores, run at %.0f%%, and %s of memory. ",
		bytesText(planShardMem), countText(planShardOps), planShardCPU*100, planMemHeadroom, planReplicaCores, planReplicaUtil*100, bytesText(planReplicaMem))
	w("taskgate's defaults, read from this build's serve --help: --lease-renew %s, --lease %s (+ %s grace), --default-ttl %s, --max-ttl %s, --max-inflight %d.\n\n", defs.renew, defs.lease, defs.grace, defs.ttl, defs.maxTTL, defs.maxInflight)
	w("| load | rate | Redis commands each | **Redis commands/s** | redis-server µs each | taskgate µs each | **taskgate cores** |\n|---|---|---|---|---|---|---|\n")
	w("| create + finish | %s/s | %s | %s | %s | %s | %.1f |\n", countText(p.rate), f3(rows["life"].cmds), countText(p.opsLife), f3(rows["life"].rs), f3(rows["life"].tg), p.tgLife)
	w("| polls of working tasks | %s/s | %s | %s | %s | %s | |\n", countText(p.rate*p.workPolls), f3(rows["pollWork"].cmds), countText(p.rate*p.workPolls*rows["pollWork"].cmds), f3(rows["pollWork"].rs), f3(rows["pollWork"].tg))
	w("| polls of completed tasks | %s/s | %s | %s | %s | %s | %.1f (all polls) |\n", countText(p.rate*p.donePolls), f3(rows["pollFirst"].cmds), countText(p.rate*p.donePolls*rows["pollFirst"].cmds), f3(rows["pollFirst"].rs), f3(rows["pollFirst"].tg), p.tgPolls)
	w("| input rounds | %s/s | %s | %s | %s | %s | %.1f |\n", countText(p.rate*planInputRounds), f3(rows["round"].cmds), countText(p.opsRounds), f3(rows["round"].rs), f3(rows["round"].tg), p.tgRounds)
	rnTask := rn // per held task: the script (the ZADD XX is per replica, the row above)
	rnTask.cmds = h.extendPer
	w("| lease renewals, every %s | %s/s | %s | %s | %s | %s | %.1f |\n", defs.renew, countText(p.renewals), f3(rnTask.cmds), countText(p.opsRenew), f3(rn.rs), f3(rn.tg), p.tgRenew)
	w("| leases index re-scoring, one ZADD XX per replica every %s | %s/s | %s (%s entries) | %s | | | |\n", defs.renew, f3(float64(p.replicas)/defs.renew.Seconds()), f3(h.zaddPer), countText(planTasks/float64(p.replicas)*h.rescoredPer), countText(p.opsIndex))
	w("| lease sweeps, every %s per replica | %s/s | %s | %s | | | |\n", defs.renew, f3(float64(p.replicas)/defs.renew.Seconds()), f3(h.sweepCmds), countText(p.opsSweep))
	w("| idle replicas (measured at 1 s periods: an upper bound) | %d replicas | %s/s each | %s | | | |\n", p.replicas, f3(idle.cmds), countText(p.opsIdle))
	w("| **total** | | | **%s** | **%.1f cores** | | **%.1f** |\n\n", countText(p.opsTotal), p.rsCPU, p.tgTotal)

	per := func(f func(capRow) float64) float64 {
		return f(rows["life"]) + p.workPolls*f(rows["pollWork"]) + p.donePolls*f(rows["pollFirst"]) + planInputRounds*f(rows["round"]) + planLifetime.Seconds()/defs.renew.Seconds()*f(rnTask)
	}
	w("One task's whole life at these assumptions (create, %.2g polls while working, one of the completed task, %.2g input rounds, finish, %.0f renewals): **%.1f Redis commands**, %.0f µs of redis-server CPU, **%.0f µs of taskgate CPU**.\n\n",
		p.workPolls, planInputRounds, planLifetime.Seconds()/defs.renew.Seconds(),
		per(func(r capRow) float64 { return r.cmds }), per(func(r capRow) float64 { return r.rs }), per(func(r capRow) float64 { return r.tg }))
	pub := func(c capCount) float64 {
		return float64(c.t.inScript["PUBLISH"]+c.t.top["PUBLISH"]) / float64(max(c.n, 1))
	}
	pubTask := pub(a.life) + planInputRounds*(pub(a.round)-pub(a.life))
	subTask := float64(a.life.t.top["SUBSCRIBE"]+a.life.t.top["UNSUBSCRIBE"]) / float64(max(a.life.n, 1))
	w("Pub/sub, not in the shard budget above: %.2g PUBLISH per task (inside the scripts: %.2g at finish, %.2g per input round), %s/s in all; in a Cluster a PUBLISH reaches every master over the cluster bus, so every shard receives all of them, however many shards there are. %.2g SUBSCRIBE/UNSUBSCRIBE per task (%s/s) go to the master each replica's one pub/sub connection sits on.\n\n",
		pubTask, pub(a.life), pub(a.round)-pub(a.life), countText(p.rate*pubTask), subTask, countText(p.rate*subTask))

	w("**Gateway replicas: %d.** CPU: %.1f cores / (%.0f cores × %.0f%%) → %d. Memory: %s per held task (largest RSS above) × %s = %s / %s per replica → %d. Connections: with %d tasks held, taskgate had %d established connections to the upstream (%.2f per held task), each on a local port, and one replica address reaches one upstream address on at most %d local ports (this machine's ip_local_port_range) → %d. ",
		p.replicas, p.tgTotal, planReplicaCores, planReplicaUtil*100, p.repCPU, bytesText(p.rssPerHeld), countText(planTasks), bytesText(planTasks*p.rssPerHeld), bytesText(planReplicaMem), p.repMem,
		h.held, h.upConns, p.sockPerHeld, p.ports, p.repPorts)
	w("That is %s held tasks per replica: --max-inflight (default %d) and the file descriptor limit must allow it.\n\n", countText(planTasks/float64(p.replicas)), defs.maxInflight)

	w("**Redis memory.** Working tasks: %s × %s = %s. Finished tasks stay behind, part by part: the hash until ttl (%s each), the tombstone until ttl + %s (%s), the owner's created-index id until --max-ttl (%s); MEMORY USAGE × %.2f, the measured used_memory / MEMORY USAGE ratio.\n\n",
		countText(planTasks), bytesText(p.memWork), bytesText(planTasks*p.memWork), bytesText(p.hashDone), p.window, bytesText(p.gone), bytesText(p.createdEntry), p.calib)
	w("| retention | working tasks | completed hashes | tombstones | created-index ids | **Redis used_memory** | × %.1f | shards by memory | by commands/s | by CPU | **shards** | used_memory per shard |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n", planMemHeadroom)
	for i := range p.memScen {
		name := fmt.Sprintf("--default-ttl %s, --max-ttl %s", p.scenTTL[i], p.scenMax[i])
		if i == 0 {
			name += " (defaults)"
		}
		w("| %s | %s | %s | %s | %s | **%s** | %s | %d | %d | %d | **%d** | %s |\n", name,
			bytesText(p.memParts[i][0]), bytesText(p.memParts[i][1]), bytesText(p.memParts[i][2]), bytesText(p.memParts[i][3]),
			bytesText(p.memScen[i]), bytesText(p.memScen[i]*planMemHeadroom),
			p.shardsMem[i], p.shardsOps[i], p.shardsCPU[i], p.shards[i], bytesText(p.memScen[i]/float64(p.shards[i])))
	}
	w("\nThe result size moves the completed hashes: each KiB more of result adds %s of used_memory at the defaults' retention (%.2f bytes per result byte, measured above).\n", bytesText(p.perResultKiB), (a.big.perTask()-a.mem.perTask())/float64(a.bigResultBytes-a.resultBytes))
	w("\n**The leases index is one key**, so one slot on one shard however many shards there are: %s commands/s land there (%.2f per task: %s; per replica every %s, %.2f: one ZADD XX and the sweep's %.2f), ",
		countText(p.hotOps), p.hotTask, perCallF(a.life.leases, float64(a.life.n)), defs.renew, p.hotRenew, h.sweepLeases)
	w("and the ZADD XX name %s entries/s to re-score (every held task's, every --lease-renew). Their execution time in the slow log (%.2f µs per entry named, on a %d-entry index) comes to **%.2f of that shard's main thread**, a lower bound: reading and parsing the commands are not in it, and the index would hold %s entries, not %d. ",
		countText(p.hotEntries), h.usPerEntry, h.leasesCard, p.hotCores, countText(planTasks), h.leasesCard)
	w("One replica's ZADD XX names all its %s held tasks: %.1f ms in which that shard serves nothing else, every %s per replica. The index holds one entry per working task, %s on that shard (%.0f B each). ",
		countText(planTasks/float64(p.replicas)), p.zaddMS, defs.renew, bytesText(p.hotMem), p.leaseEntry)
	if p.shards[0] < 0 {
		w("**No shard count fits: the index alone is over one shard's budget.** ")
	}
	w("The shard counts above keep that shard, its even share of the rest plus all of the index, within the budget (at the defaults' %d shards: %s commands/s, %.2f cores); spread evenly, the same load would need %d shards by commands/s and %d by CPU.\n\n",
		p.shards[0], countText(p.hotShardOps), p.hotShardCPU, ceilDiv(p.opsTotal, planShardOps), ceilDiv(p.rsCPU, planShardCPU))

	// The cluster check.
	w("### Check: %d replicas on a %d-master Redis Cluster\n\n", len(c.addrs), len(c.addrs))
	w("redis-cli --cluster create … --cluster-replicas 0, then taskgate --redis-url redis+cluster://… with --lease %s --lease-renew %s, so no renewal or sweep runs during the check (both are measured above). %d tasks (slow tool, %d s), %d per owner, created round robin over the replicas at c=%d; each polled once while working, on the next replica (%d were working); after they finished, polled twice on the third replica. ",
		capClusterLease, capClusterRenew, c.n, capClusterHold, capTasksPerOwner, o.concurrency, c.working)
	w("Commands summed over the masters' slow logs; memory over their used_memory. On 2 CPUs this checks what a task costs, not throughput.\n\n")
	crow := func(cnt capCount) capRow { return row("", "", cnt, float64(c.n), nil, 0, false) }
	cc := []struct {
		name        string
		clu, single capRow
	}{
		{"create", crow(c.create), rows["create"]},
		{"tasks/get, working", crow(c.pollWork), rows["pollWork"]},
		{"finish", crow(c.finish), rows["finish"]},
		{"tasks/get, completed, first time", crow(c.pollFirst), rows["pollFirst"]},
		{"tasks/get, completed, again", crow(c.pollRepeat), rows["pollRepeat"]},
	}
	w("| per task | cluster: commands | single server | **ratio** | cluster: run inside scripts | single | cluster: round trips | single | cluster: unsharded | single |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var cluTot, sinTot float64
	for _, x := range cc {
		cluTot += x.clu.cmds
		sinTot += x.single.cmds
		w("| %s | %s | %s | **%s** | %s | %s | %s | %s | %s | %s |\n", x.name, f3(x.clu.cmds), f3(x.single.cmds), ratioF(x.clu.cmds, x.single.cmds),
			f3(x.clu.scripts), f3(x.single.scripts), f3(x.clu.rtt), f3(x.single.rtt), f3(x.clu.global), f3(x.single.global))
	}
	w("| **the whole life** | **%s** | **%s** | **%s** | | | | | | |\n\n", f3(cluTot), f3(sinTot), ratioF(cluTot, sinTot))
	w("| Redis memory per task | cluster | single server | **ratio** | cluster: client buffers | single |\n|---|---|---|---|---|---|\n")
	w("| working | %s | %s | **%s** | %s | %s |\n", bytesText(c.memWork.perTask()), bytesText(h.mem.perTask()), ratioF(c.memWork.perTask(), h.mem.perTask()), bytesText(c.memWork.clientsPerTask()), bytesText(h.mem.clientsPerTask()))
	w("| completed | %s | %s | **%s** | %s | %s |\n", bytesText(c.memDone.perTask()), bytesText(a.mem.perTask()), ratioF(c.memDone.perTask(), a.mem.perTask()), bytesText(c.memDone.clientsPerTask()), bytesText(a.mem.clientsPerTask()))
	w("| completed, MEMORY USAGE | %s | %s | **%s** | | |\n\n", bytesText(float64(c.memDone.delta.total())/float64(c.n)), bytesText(float64(a.mem.delta.total())/float64(a.mem.n)),
		ratioF(float64(c.memDone.delta.total())/float64(c.n), float64(a.mem.delta.total())/float64(a.mem.n)))
	w("Completed tasks in the cluster, by key (all masters):\n\n")
	writeCensus(&sb, c.memDone.delta, c.n)
	w("\nHow the tasks spread over the masters:\n\n| master | slots | task hashes | share | commands (all batches) | share | of which SUBSCRIBE, UNSUBSCRIBE | used_memory delta, completed (less client buffers) | per task hash on it |\n|---|---|---|---|---|---|---|---|---|\n")
	var allCmds int
	perNode := make([]int, len(c.addrs))
	subNode := make([]int, len(c.addrs))
	for _, cnt := range []capCount{c.create, c.pollWork, c.finish, c.pollFirst, c.pollRepeat} {
		for i, v := range cnt.perNode {
			perNode[i] += v
			subNode[i] += cnt.subNode[i]
			allCmds += v
		}
	}
	mx, mean := 0, 0.0
	for i := range c.addrs {
		_, t := c.memDone.nodes[i].role("task")
		mx = max(mx, t.keys)
		mean += float64(t.keys) / float64(len(c.addrs))
		note := ""
		if _, l := c.memWork.nodes[i].role("leases"); l.members > 0 {
			_, ld := c.memDone.nodes[i].role("leases")
			note = fmt.Sprintf(" (leases index: %d entries working, %d finished)", l.members, ld.members)
		}
		d := float64((c.memDone.after[i].used - c.memDone.after[i].clients) - (c.memDone.before[i].used - c.memDone.before[i].clients))
		w("| %s%s | %d | %d | %.1f%% | %d | %.1f%% | %d | %s | %s |\n", c.addrs[i], note, c.slots[i], t.keys, 100*float64(t.keys)/float64(c.n), perNode[i], 100*float64(perNode[i])/float64(max(allCmds, 1)),
			subNode[i], bytesText(d), bytesText(d/float64(max(t.keys, 1))))
	}
	subMax, subOn, subAll := 0, 0, 0
	for _, v := range subNode {
		subMax, subAll = max(subMax, v), subAll+v
		if v > 0 {
			subOn++
		}
	}
	w("\n- The replicas' SUBSCRIBE and UNSUBSCRIBE went to %d of the %d masters, the busiest taking %.0f%% of them.", subOn, len(c.addrs), 100*float64(subMax)/float64(max(subAll, 1)))
	w("\n- Largest master / mean, task hashes: %.2f×. An owner's keys share its hash tag, so the spread comes from owners (%d here), not from tasks: one Authorization's tasks all live on one master.\n", float64(mx)/mean, c.n/capTasksPerOwner)
	if p := firstErr.Load(); p != nil {
		w("- first load error: `%s`\n", strings.ReplaceAll(*p, "`", "'"))
	}
	w("\nReproduce: `%s`\n", reproduce(o, "capacity", "count-requests", "tasks", "concurrency", "held"))
	return sb.String()
}

func ratioF(a, b float64) string {
	if b == 0 {
		if a == 0 {
			return "1.00×"
		}
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
