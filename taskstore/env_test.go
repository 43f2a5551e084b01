package taskstore

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
)

// go-redis logs every failed dial; the restart tests cause many on purpose.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...interface{}) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

// The whole suite runs against every backend: miniredis in process, and a
// real redis-server started by the test on a free port.
var backends = []struct {
	name string
	open func(t *testing.T) *env
}{
	{"miniredis", openMiniredis},
	{"redis-server", openRedisServer},
}

// env is one backend with a controllable clock.
type env struct {
	t     *testing.T
	rdb   *redis.Client
	clock *fakeClock
	mini  *miniredis.Miniredis // miniredis backend
	srv   *redistest.Server    // redis-server backend
}

func openMiniredis(t *testing.T) *env {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: 1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	return &env{t: t, rdb: rdb, clock: newFakeClock(), mini: m}
}

func openRedisServer(t *testing.T) *env {
	srv := redistest.New(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: 1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	return &env{t: t, rdb: rdb, clock: newFakeClock(), srv: srv}
}

// forEachBackend runs fn once per backend, each on a fresh server.
func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			fn(t, b.open(t))
		})
	}
}

// store returns a Store on the env's clock; opts may change options.
func (e *env) store(t *testing.T, opts ...func(*Options)) *Store {
	o := Options{Clock: e.clock.Now}
	for _, f := range opts {
		f(&o)
	}
	s := New(e.rdb, o)
	t.Cleanup(func() { s.Close() })
	return s
}

// elapse lets d pass for both the store's clock and Redis' key expiry:
// miniredis is fast-forwarded, a real redis-server is waited for.
func (e *env) elapse(d time.Duration) {
	e.clock.Advance(d)
	if e.mini != nil {
		e.mini.FastForward(d)
		return
	}
	time.Sleep(d)
}

func (e *env) hash(key string) map[string]string {
	e.t.Helper()
	m, err := e.rdb.HGetAll(context.Background(), key).Result()
	if err != nil {
		e.t.Fatalf("HGETALL %s: %v", key, err)
	}
	return m
}

func (e *env) exists(key string) bool {
	e.t.Helper()
	n, err := e.rdb.Exists(context.Background(), key).Result()
	if err != nil {
		e.t.Fatalf("EXISTS %s: %v", key, err)
	}
	return n == 1
}

func (e *env) isMember(set, member string) bool {
	e.t.Helper()
	err := e.rdb.ZScore(context.Background(), set, member).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		e.t.Fatalf("ZSCORE: %v", err)
	}
	return err == nil
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Now().Truncate(time.Millisecond)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var ctx = context.Background()

func mustCreate(t *testing.T, s *Store, owner string) *Task {
	t.Helper()
	task, err := s.Create(ctx, NewTask{Owner: owner, Tool: "slow", Protocol: Protocol2025})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return task
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
}
