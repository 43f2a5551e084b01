package webhook

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/taskstore"
)

// Defaults of Config.
const (
	DefaultRetryFor    = 24 * time.Hour
	DefaultTimeout     = 10 * time.Second
	DefaultConcurrency = 4
	DefaultPoll        = time.Second
	DefaultFirstRetry  = 5 * time.Second
	DefaultMaxBackoff  = time.Hour
	// DefaultOpenAfter, DefaultProbeFirst and DefaultProbeMax shape an
	// endpoint's circuit breaker (breaker.go): open after 5 failures in a
	// row, then one probe 1 s later, doubling to 10 s, so a receiver back
	// up gets its backlog within 10 s.
	DefaultOpenAfter  = 5
	DefaultProbeFirst = time.Second
	DefaultProbeMax   = 10 * time.Second
	// maxResponse bounds what is read of a receiver's answer: only its
	// status counts, the body is read (then dropped) so the connection
	// can be reused.
	maxResponse = 64 << 10
	// batch is how many events or deliveries one store call takes.
	batch = 100
	// stopGrace bounds Stop's last dispatch pass.
	stopGrace = 2 * time.Second
)

// Store is what the Dispatcher needs of the task store (taskstore.Store):
// the owners' outboxes and the endpoints' delivery queues.
type Store interface {
	ReadWebhookEvents(ctx context.Context, consumer string, max int, claimAfter time.Duration) ([]taskstore.WebhookEvent, error)
	AckWebhookEvents(ctx context.Context, evs []taskstore.WebhookEvent) error
	EnqueueDeliveries(ctx context.Context, ds []taskstore.Delivery, keep time.Duration) ([]bool, error)
	ClaimDeliveries(ctx context.Context, endpoint string, max int, lease time.Duration) ([]taskstore.Delivery, error)
	DeliveryDone(ctx context.Context, endpoint, eventID string) error
	DeliveryRetry(ctx context.Context, endpoint, eventID string, next time.Time, lastErr string) error
	DeliveryDead(ctx context.Context, endpoint, eventID, lastErr string) error
	DeadDeliveries(ctx context.Context, endpoint string, limit int) ([]taskstore.Delivery, error)
	RetryDead(ctx context.Context, endpoint, eventID string) error
	WebhookQueueStats(ctx context.Context, endpoint string) (due, dead int64, err error)
	WatchWebhookEvents(ctx context.Context, ch chan<- struct{}) (stop func(), err error)
	SweepWebhookOutboxes(ctx context.Context) (int, error)
}

// Config is what a Dispatcher is built with. Zero values take defaults.
type Config struct {
	Store     Store
	Endpoints []Endpoint
	// Consumer names this replica in the outboxes' consumer group.
	Consumer string
	// ConsoleURL is the console's public base URL, for payloads' links.
	ConsoleURL string
	// RetryFor is how long a delivery is retried before it is dead.
	RetryFor time.Duration
	// Timeout bounds one POST, connection to last byte read.
	Timeout time.Duration
	// Concurrency is the most POSTs in flight per endpoint.
	Concurrency int
	// Poll is how often the outboxes and the due queues are read when
	// nothing wakes the loops sooner.
	Poll time.Duration
	// FirstRetry and MaxBackoff shape the backoff: the n-th retry waits a
	// random time in [0, min(MaxBackoff, FirstRetry·2ⁿ⁻¹)] ("full jitter").
	FirstRetry, MaxBackoff time.Duration
	// OpenAfter is how many POSTs in a row must fail, with no success, for
	// an endpoint's breaker to open: then one delivery at a time is sent,
	// ProbeFirst after the last failure, doubling up to ProbeMax, until
	// one succeeds (breaker.go).
	OpenAfter            int
	ProbeFirst, ProbeMax time.Duration
	// Client sends the POSTs; default: one with Timeout that follows no
	// redirect (a 3xx is a failure, and only configured URLs are called).
	Client *http.Client
	Tracer trace.TracerProvider // nil: no spans
	Logger zerolog.Logger
	Clock  func() time.Time
	// Rand is a number in [0, 1) for the jitter; default math/rand/v2.
	Rand func() float64
}

// Dispatcher moves events from the owners' outboxes to the endpoints'
// queues (dispatch.go) and delivers them (deliver.go). Its goroutines
// are its own: Start starts them, Stop ends them and waits.
type Dispatcher struct {
	cfg     Config
	metrics *Metrics
	tracer  trace.Tracer
	log     zerolog.Logger

	mu        sync.Mutex
	endpoints map[string]*endpointLoop // by name; under mu
	order     []Endpoint               // as configured; under mu
	started   bool
	stopping  bool

	ctx    context.Context // ends at Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{} // the dispatch loop's
}

// New checks cfg and builds a Dispatcher; nothing runs until Start.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Store == nil {
		return nil, errors.New("webhook: no store")
	}
	if err := CheckEndpoints(cfg.Endpoints); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dispatcher{
		cfg:       cfg,
		metrics:   newMetrics(),
		log:       cfg.Logger.With().Str("op", "webhook").Logger(),
		endpoints: map[string]*endpointLoop{},
		ctx:       ctx,
		cancel:    cancel,
		wake:      make(chan struct{}, 1),
	}
	if cfg.Tracer != nil {
		d.tracer = cfg.Tracer.Tracer("github.com/taskgate/taskgate/webhook")
	}
	d.setEndpoints(cfg.Endpoints)
	return d, nil
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.RetryFor, DefaultRetryFor)
	def(&c.Timeout, DefaultTimeout)
	def(&c.Poll, DefaultPoll)
	def(&c.FirstRetry, DefaultFirstRetry)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	def(&c.ProbeFirst, DefaultProbeFirst)
	def(&c.ProbeMax, DefaultProbeMax)
	if c.OpenAfter <= 0 {
		c.OpenAfter = DefaultOpenAfter
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Rand == nil {
		c.Rand = randFloat
	}
	if c.Client == nil {
		c.Client = &http.Client{
			Timeout: c.Timeout,
			// Only the configured URL is called: a redirect could point
			// anywhere (SECURITY.md), so a 3xx is a failed attempt.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if c.Consumer == "" {
		c.Consumer = "taskgate"
	}
	return c
}

// Metrics are the Dispatcher's Prometheus collectors, for the gateway to
// register with its own.
func (d *Dispatcher) Metrics() *Metrics { return d.metrics }

// Start starts the dispatch loop and a delivery loop per endpoint.
func (d *Dispatcher) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.stopping {
		return
	}
	d.started = true
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.dispatchLoop() }()
	for _, l := range d.endpoints {
		d.startLoop(l)
	}
}

// Stop ends the loops and waits for them (and the POSTs in flight, at
// most Timeout). Before that it moves what the outboxes hold to the
// queues once more, bounded, so events of this replica's last changes
// are queued where any replica delivers them.
func (d *Dispatcher) Stop() {
	d.mu.Lock()
	if d.stopping {
		d.mu.Unlock()
		return
	}
	d.stopping = true
	started := d.started
	d.mu.Unlock()
	if started {
		ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
		d.dispatchOnce(ctx)
		cancel()
	}
	d.cancel()
	d.wg.Wait()
}

// SetEndpoints puts a new set of endpoints in force (a reloaded
// --webhooks file): loops start for new names and stop for removed ones;
// a kept name takes its new URL, secrets and filters at its next
// delivery. A removed endpoint's queue stays in the store, delivered
// again if the name comes back.
func (d *Dispatcher) SetEndpoints(eps []Endpoint) error {
	if err := CheckEndpoints(eps); err != nil {
		return err
	}
	d.setEndpoints(eps)
	return nil
}

func (d *Dispatcher) setEndpoints(eps []Endpoint) {
	d.mu.Lock()
	defer d.mu.Unlock()
	keep := make(map[string]bool, len(eps))
	for _, e := range eps {
		keep[e.Name] = true
		if l, ok := d.endpoints[e.Name]; ok {
			l.set(e)
			continue
		}
		l := newEndpointLoop(d, e)
		d.endpoints[e.Name] = l
		d.metrics.prepare(e.Name)
		if d.started && !d.stopping {
			d.startLoop(l)
		}
	}
	for name, l := range d.endpoints {
		if !keep[name] {
			l.stop()
			delete(d.endpoints, name)
			d.metrics.open.DeleteLabelValues(name)
		}
	}
	d.order = append([]Endpoint(nil), eps...)
}

func (d *Dispatcher) startLoop(l *endpointLoop) {
	d.wg.Add(1)
	go func() { defer d.wg.Done(); l.run(d.ctx) }()
}

// Endpoints are the endpoints in force, as configured.
func (d *Dispatcher) Endpoints() []Endpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Endpoint(nil), d.order...)
}

// wakeEndpoint tells an endpoint's loop it has something due now.
func (d *Dispatcher) wakeEndpoint(name string) {
	d.mu.Lock()
	l := d.endpoints[name]
	d.mu.Unlock()
	if l != nil {
		l.poke()
	}
}

// Wake tells the dispatch loop an outbox has new events (a hint: it reads
// the outboxes every Poll anyway).
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}
