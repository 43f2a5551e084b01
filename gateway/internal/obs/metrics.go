package obs

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// Metrics, served in the Prometheus text format on /metrics (or where
// Config.MetricsPath says). Every figure is this replica's: a task
// transition is counted once, by the replica that made it (the worker's
// for completed and failed, the one that took tasks/cancel for cancelled,
// the sweeping one for a recovered lease), so summing over replicas gives
// the fleet. The names:
//
//	taskgate_tasks_created_total{tool,flavour}
//	taskgate_tasks_finished_total{tool,status}        completed|failed|cancelled
//	taskgate_tasks_live{status}                       working|input_required, of the workers on this replica
//	taskgate_task_duration_seconds{tool,status}       creation → terminal
//	taskgate_task_input_wait_seconds{tool}            time a task waited for its client's answers
//	taskgate_upstream_request_duration_seconds{method} until the upstream's response headers
//	taskgate_upstream_errors_total{method,reason}     unreachable|http_4xx|http_5xx
//	taskgate_upstream_up                              1 when the upstream was last seen reachable and answering as MCP (internal/upstreamside/health.go)
//	taskgate_store_command_duration_seconds{command}  one Redis command or pipeline
//	taskgate_store_errors_total{command}              failed Redis commands (not "no such key")
//	taskgate_held_calls                               in-flight calls: upstream calls the runner holds (the --max-inflight count)
//	taskgate_leases_recovered_total                   tasks of dead replicas failed by this one
//	taskgate_task_reruns_total{tool,cause}            attempts begun again of rerunnable tasks (internal/runner/rerun.go)
//	taskgate_poll_rate_limited_total{method}          polls refused with 429
//	taskgate_policy_reloads_total{result}             ok|error reloads of the rules file
//	taskgate_auth_refusals_total{reason}              requests refused by Config.Auth (internal/identity/auth.go)
//	taskgate_refusals_total{reason}                   refused for fair shares between principals (refusals.go)
//	taskgate_build_info{version,revision,goversion}   1
//	taskgate_store_pool_connections{state}            total|idle of the Redis client's pool
//	taskgate_store_pool_waits_total{result}           hit|miss|timeout of taking a connection
//	taskgate_store_slots_unreachable                  Redis Cluster only: hash slots this replica cannot reach (RegisterCluster)
//	taskgate_store_slot_reloads_total                 Redis Cluster only: slot map reloads asked for after failed commands
//	taskgate_requests_total{method,outcome}           HTTP requests served: ok|client_error|server_error (requests.go)
//	taskgate_request_duration_seconds{method}         arrival → end of the answer (or of its stream)
//	taskgate_webhook_deliveries_total{endpoint,event,outcome}, taskgate_webhook_delivery_seconds{endpoint},
//	taskgate_webhook_endpoint_open{endpoint}
//	                                                  with Config.Webhooks: the webhook package's (RegisterCollectors)
//	taskgate_stdio_children{scope}, taskgate_stdio_resident_bytes{stat}, taskgate_stdio_starts_total{kind},
//	taskgate_stdio_start_seconds{kind}, taskgate_stdio_kills_total{limit}
//	                                                  with --upstream-command: upstream/stdio's (Config.Collectors)
//
// plus the Go runtime's and the process' standard collectors.
type Metrics struct {
	reg        *prometheus.Registry
	Trace      *Tracing               // nil: off
	collectors []prometheus.Collector // what register registered, for names

	created       *prometheus.CounterVec
	finished      *prometheus.CounterVec
	live          *prometheus.GaugeVec
	duration      *prometheus.HistogramVec
	InputWait     *prometheus.HistogramVec
	upDuration    *prometheus.HistogramVec
	upErrors      *prometheus.CounterVec
	UpstreamUp    prometheus.Gauge
	storeDuration *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec
	Recovered     prometheus.Counter
	PollLimited   *prometheus.CounterVec
	Reloads       *prometheus.CounterVec
	AuthRefusals  *prometheus.CounterVec // nil without Config.Auth
	// SessionRefusals: requests naming a session the requester may not
	// use (RegisterSessionBinding); nil without Config.Auth.
	SessionRefusals *prometheus.CounterVec
	refusals        *refusals // fair shares (refusals.go); nil: not registered
	Requests        requestMetrics

	Tools toolLabels
	http  http.Handler

	// trends is the console's accumulator (trends.go); nil: off.
	trends *Trends
}

// taskBuckets span a task's life: 10 ms to an hour.
var taskBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// fastBuckets span one round trip: 100 µs to 10 s.
var fastBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}

func NewMetrics(heldCalls func() float64) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		created: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_tasks_created_total", Help: "Tasks created on this replica, per tool and task flavour (2025-11-25 or 2026-07-28).",
		}, []string{"tool", "flavour"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_tasks_finished_total", Help: "Tasks this replica moved to a terminal status, per tool and status.",
		}, []string{"tool", "status"}),
		live: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "taskgate_tasks_live", Help: "Non-terminal tasks whose worker runs on this replica, by status.",
		}, []string{"status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "taskgate_task_duration_seconds", Help: "Time from a task's creation to its terminal status, per tool and status.",
			Buckets: taskBuckets,
		}, []string{"tool", "status"}),
		InputWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "taskgate_task_input_wait_seconds", Help: "Time a task spent waiting for its client's answers to input requests, per tool (tasks that asked for input).",
			Buckets: taskBuckets,
		}, []string{"tool"}),
		upDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "taskgate_upstream_request_duration_seconds", Help: "Time from sending a request to the upstream to its response headers, per MCP method.",
			Buckets: fastBuckets,
		}, []string{"method"}),
		upErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_upstream_errors_total", Help: "Upstream requests that failed, per MCP method and reason (unreachable, http_4xx, http_5xx).",
		}, []string{"method", "reason"}),
		UpstreamUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "taskgate_upstream_up", Help: "1 when the upstream was last seen reachable and answering as an MCP endpoint (a request, or a /readyz probe), else 0.",
		}),
		storeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "taskgate_store_command_duration_seconds", Help: "Redis command round trips of the task store, per command (pipeline for a pipeline).",
			Buckets: fastBuckets,
		}, []string{"command"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_store_errors_total", Help: "Redis commands of the task store that failed (a missing key is not a failure), per command.",
		}, []string{"command"}),
		Recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "taskgate_leases_recovered_total", Help: "Tasks of a stopped replica whose expired lease this replica claimed and failed.",
		}),
		PollLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_poll_rate_limited_total", Help: "Polls refused with HTTP 429 because they came much faster than the suggested pollInterval, per method.",
		}, []string{"method"}),
	}
	m.Reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "taskgate_policy_reloads_total", Help: "Reloads of the --policy rules file (SIGHUP or a change), by result: ok, or error (the previous rules stay).",
	}, []string{"result"})
	m.Reloads.WithLabelValues("ok")
	m.Reloads.WithLabelValues("error")
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "taskgate_held_calls", Help: "Upstream calls this replica holds for tasks, hybrid and bridged calls (what --max-inflight caps).",
	}, heldCalls)
	m.register(m.created, m.finished, m.live, m.duration, m.InputWait, m.upDuration, m.upErrors, m.UpstreamUp,
		m.storeDuration, m.storeErrors, m.Recovered, m.PollLimited, m.Reloads, held,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Requests = newRequestMetrics(m.register)
	m.http = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: nil})
	for _, s := range []taskstore.Status{taskstore.StatusWorking, taskstore.StatusInputRequired} {
		m.live.WithLabelValues(string(s)) // present at 0 from the start
	}
	return m
}

// RegisterBuild adds taskgate_build_info: the version the command was
// built as, the VCS revision the Go toolchain recorded, the Go version.
func (m *Metrics) RegisterBuild(version string) {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	if version == "" {
		version = "unknown"
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "taskgate_build_info",
		Help:        "Always 1; the labels say which build of taskgate this replica runs.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()}})
	info.Set(1)
	m.register(info)
}

// RegisterPool adds the Redis client's connection pool statistics.
func (m *Metrics) RegisterPool(stats func() *redis.PoolStats) {
	conns := func(pick func(*redis.PoolStats) uint32) func() float64 {
		return func() float64 { return float64(pick(stats())) }
	}
	help := "Connections of the task store's Redis client pool, by state."
	waits := "Times a Redis command took a connection from the pool: found idle (hit), dialed (miss), or gave up waiting (timeout)."
	m.register(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "taskgate_store_pool_connections", Help: help, ConstLabels: prometheus.Labels{"state": "total"}},
			conns(func(p *redis.PoolStats) uint32 { return p.TotalConns })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "taskgate_store_pool_connections", Help: help, ConstLabels: prometheus.Labels{"state": "idle"}},
			conns(func(p *redis.PoolStats) uint32 { return p.IdleConns })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "taskgate_store_pool_waits_total", Help: waits, ConstLabels: prometheus.Labels{"result": "hit"}},
			conns(func(p *redis.PoolStats) uint32 { return p.Hits })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "taskgate_store_pool_waits_total", Help: waits, ConstLabels: prometheus.Labels{"result": "miss"}},
			conns(func(p *redis.PoolStats) uint32 { return p.Misses })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "taskgate_store_pool_waits_total", Help: waits, ConstLabels: prometheus.Labels{"result": "timeout"}},
			conns(func(p *redis.PoolStats) uint32 { return p.Timeouts })),
	)
}

// RegisterCluster adds the Redis Cluster families:
// taskgate_store_slots_unreachable, the hash slots this replica cannot
// reach now (all 16384 when no master answers), and
// taskgate_store_slot_reloads_total, the slot map reloads the store asked
// for after failed commands (taskstore/failover.go). The gauge asks the
// store at each scrape, which reuses its answer for a second.
func (m *Metrics) RegisterCluster(st *taskstore.Store) {
	unreachable := func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ks, err := st.Keyspace(ctx)
		if err != nil {
			return taskstore.ClusterSlots
		}
		return float64(ks.Unreachable)
	}
	m.register(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "taskgate_store_slots_unreachable",
			Help: "Hash slots of the Redis Cluster this replica cannot reach now: their master does not answer or reports the cluster down (16384 when none answers)."}, unreachable),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "taskgate_store_slot_reloads_total",
			Help: "Reloads of the Redis Cluster slot map the task store asked for because commands failed as a dead or demoted node makes them fail (at most 4 a second)."},
			func() float64 { return float64(st.ClusterReloads()) }),
	)
}

// RegisterCollectors adds collectors built outside the gateway (the
// webhook Dispatcher's).
func (m *Metrics) RegisterCollectors(cs ...prometheus.Collector) { m.register(cs...) }

// register registers cs and remembers them (names).
func (m *Metrics) register(cs ...prometheus.Collector) {
	m.reg.MustRegister(cs...)
	m.collectors = append(m.collectors, cs...)
}

// RegisterLimit adds taskgate_max_inflight, the --max-inflight in force
// (0: no limit), so that alerts can compare taskgate_held_calls with it.
func (m *Metrics) RegisterLimit(maxInflight int) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "taskgate_max_inflight",
		Help: "The --max-inflight limit of this replica on held upstream calls; 0 means no limit."})
	g.Set(float64(max(maxInflight, 0)))
	m.register(g)
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Names are the metric families registered through register, sorted,
// whether or not they have series yet.
func (m *Metrics) Names() []string {
	seen := map[string]bool{}
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range m.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	for d := range ch {
		if sub := fqName.FindStringSubmatch(d.String()); sub != nil {
			seen[sub[1]] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler { return m.http }

// TaskCreated, taskFinished: the counters and, for a terminal task, its
// Duration.
func (m *Metrics) TaskCreated(tool string, proto taskstore.Protocol) {
	m.created.WithLabelValues(m.Tools.Label(tool), string(proto)).Inc()
	m.trends.created(tool)
}

func (m *Metrics) TaskFinished(t *taskstore.Task, status taskstore.Status, inputWait time.Duration) {
	l := m.Tools.Label(t.Tool)
	m.finished.WithLabelValues(l, string(status)).Inc()
	took := time.Duration(-1)
	if !t.CreatedAt.IsZero() {
		took = time.Since(t.CreatedAt)
		m.duration.WithLabelValues(l, string(status)).Observe(took.Seconds())
	}
	m.trends.finished(t.Tool, status, took)
	m.Trace.EndTask(t, status, inputWait) // this replica ended it: it records the task's span
}

// LiveTask tracks one worker's task in taskgate_tasks_live: set moves it
// to a status, done takes it out. Not safe for concurrent use (one worker).
// NewLiveTask is a task not yet counted in m's live gauge.
func NewLiveTask(m *Metrics) LiveTask { return LiveTask{m: m} }

type LiveTask struct {
	m      *Metrics
	status taskstore.Status // "" before set and after done
}

func (l *LiveTask) Set(s taskstore.Status) {
	if l.status == s {
		return
	}
	if l.status != "" {
		l.m.live.WithLabelValues(string(l.status)).Dec()
	}
	l.status = s
	if s != "" {
		l.m.live.WithLabelValues(string(s)).Inc()
	}
}

func (l *LiveTask) Done() { l.Set("") }

// maxToolLabels bounds the tool label's values: tool names come from
// clients, and a client calling made-up names must not grow the metrics
// without end. Past the bound, new names count as "other".
const maxToolLabels = 500

type toolLabels struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

func (t *toolLabels) Label(tool string) string {
	if tool == "" {
		return "unknown"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[tool]; ok {
		return tool
	}
	if len(t.seen) >= maxToolLabels {
		return "other"
	}
	if t.seen == nil {
		t.seen = map[string]struct{}{}
	}
	t.seen[tool] = struct{}{}
	return tool
}

// knownMethods are the method label values of upstream metrics; any other
// method (a client may send anything) is "other".
var knownMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true, "subscriptions/listen": true,
	"tools/list": true, "tools/call": true, "resources/list": true, "resources/read": true,
	"resources/templates/list": true, "resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true, "completion/complete": true, "logging/setLevel": true,
	"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true, "tasks/update": true,
	"notification": true, "response": true, "GET": true, "DELETE": true,
}

func MethodLabel(m string) string {
	if knownMethods[m] {
		return m
	}
	if strings.HasPrefix(m, "notifications/") {
		return "notification"
	}
	return "other"
}

// MetricMethod is msg's method as the metrics name it: "response" for a
// client's answer to a server request.
func MetricMethod(msg *mcpwire.Message) string {
	if m := msg.MethodName(); m != "" {
		return m
	}
	return "response"
}

// MethodCtx is r's context naming msg's method for the upstream metrics.
func MethodCtx(r *http.Request, msg *mcpwire.Message) context.Context {
	return upstream.WithMethod(r.Context(), MetricMethod(msg))
}

// ObserveUpstream is the upstream client's observer (Client.SetObserver).
func (m *Metrics) ObserveUpstream(o upstream.Observation) {
	method := MethodLabel(o.Method)
	switch {
	case o.Err != nil:
		m.upErrors.WithLabelValues(method, "unreachable").Inc()
		return
	case o.Status >= 500:
		m.upErrors.WithLabelValues(method, "http_5xx").Inc()
	case o.Status >= 400:
		m.upErrors.WithLabelValues(method, "http_4xx").Inc()
	}
	m.upDuration.WithLabelValues(method).Observe(o.Took.Seconds())
}

// storeHook measures every Redis command the task store sends.
type storeHook struct{ m *Metrics }

// NewStoreHook is the hook that times m's store commands.
func NewStoreHook(m *Metrics) storeHook { return storeHook{m} }

func (storeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s storeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		s.observe(cmd.Name(), time.Since(start), err)
		return err
	}
}

func (s storeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		s.observe("pipeline", time.Since(start), err)
		return err
	}
}

func (s storeHook) observe(name string, took time.Duration, err error) {
	name = strings.ToLower(name)
	if err != nil && !errors.Is(err, redis.Nil) && !isScriptMiss(err) {
		s.m.storeErrors.WithLabelValues(name).Inc()
		return
	}
	s.m.storeDuration.WithLabelValues(name).Observe(took.Seconds())
}

// isScriptMiss: EVALSHA of a script Redis does not have yet; go-redis'
// Script.Run retries with EVAL, so it is not a failure.
func isScriptMiss(err error) bool { return strings.HasPrefix(err.Error(), "NOSCRIPT") }

// Tracer is m's tracing; nil (off) on a nil *metrics too.
func (m *Metrics) Tracer() *Tracing {
	if m == nil {
		return nil
	}
	return m.Trace
}

// authReasons are the reasons a request is refused: no token, the RFC 6750
// error codes, an authorization server that cannot be reached, and a
// client address over its introspection limit.
var authReasons = []string{"no_token", "invalid_request", "invalid_token", "insufficient_scope", "unavailable", "rate_limited"}

// RegisterAuth adds taskgate_auth_refusals_total, every reason present at
// 0 so alerts see a rise from the start.
func (m *Metrics) RegisterAuth() {
	m.AuthRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "taskgate_auth_refusals_total", Help: "Requests to the MCP endpoint refused by the gateway's token check, by reason: no_token, invalid_request, invalid_token, insufficient_scope, unavailable (the authorization server could not be reached: 503), rate_limited (the client's address caused too many introspection calls: 429).",
	}, []string{"reason"})
	for _, r := range authReasons {
		m.AuthRefusals.WithLabelValues(r)
	}
	m.register(m.AuthRefusals)
}

// RegisterSessionBinding adds taskgate_session_refusals_total, both
// reasons present at 0: other_principal (a session bound to another
// principal: an attempt to use someone else's session id) and unknown (no
// binding: ended, expired, or never opened through the gateway).
func (m *Metrics) RegisterSessionBinding() {
	m.SessionRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "taskgate_session_refusals_total", Help: "Requests naming a client session that the requester's principal may not use, answered as an unknown session (404), by reason: other_principal (the session is another principal's), unknown (no binding: ended, expired, or opened before sign-in).",
	}, []string{"reason"})
	for _, r := range []string{"other_principal", "unknown"} {
		m.SessionRefusals.WithLabelValues(r)
	}
	m.register(m.SessionRefusals)
}

// Every HTTP request the Handler serves is counted in
// taskgate_requests_total{method,outcome} and timed in
// taskgate_request_duration_seconds{method} (method: the MCP method of a
// POST, bounded by MethodLabel, or GET/DELETE/other for the rest; outcome
// from the HTTP status: ok for 1xx–3xx, client_error, server_error), and,
// with Config.AccessLog, logged as one line when it ends. A streamed answer
// (SSE) ends when its stream does, so its duration is the stream's.

// requestMetrics are the two request families.
type requestMetrics struct {
	Total    *prometheus.CounterVec
	Duration *prometheus.HistogramVec
}

func newRequestMetrics(register func(...prometheus.Collector)) requestMetrics {
	rm := requestMetrics{
		Total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_requests_total", Help: "HTTP requests served, per MCP method (GET, DELETE or other for non-POSTs) and outcome (ok, client_error, server_error from the HTTP status).",
		}, []string{"method", "outcome"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "taskgate_request_duration_seconds", Help: "Time from a request's arrival to the end of its answer (of its stream, for SSE), per MCP method.",
			Buckets: taskBuckets,
		}, []string{"method"}),
	}
	register(rm.Total, rm.Duration)
	return rm
}

// Outcome is the outcome label of an HTTP status.
func Outcome(status int) string {
	switch {
	case status >= 500:
		return "server_error"
	case status >= 400:
		return "client_error"
	}
	return "ok"
}
