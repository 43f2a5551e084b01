package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// target is one endpoint under load.
type target struct {
	name string
	url  string
}

// result is what one load of one target measured.
type result struct {
	requests int
	errors   int
	elapsed  time.Duration
	lat      []time.Duration
}

func (r result) rps() float64 { return float64(r.requests) / r.elapsed.Seconds() }

func (r result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	s := slices.Clone(r.lat)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

func (r *result) merge(o result) {
	r.requests += o.requests
	r.errors += o.errors
	r.elapsed += o.elapsed
	r.lat = append(r.lat, o.lat...)
}

// request is one HTTP request a load sends. body is a format with one %d,
// filled with a fresh JSON-RPC id per send: a session refuses concurrent
// requests that reuse an id.
type request struct {
	body   string
	header http.Header
	// bodies, when set, replace body: client i of a load sends bodies[i%len].
	bodies []string
	// headers, when set, replace header the same way (e.g. an Mcp-Name
	// that must match the body's taskId).
	headers []http.Header
	// want, when set, must occur in every answer's body, or the send is an
	// error (JSON-RPC errors come with HTTP 200).
	want []byte
}

// forClient is the request client i of a load sends.
func (r request) forClient(i int) request {
	if len(r.bodies) > 0 {
		r.body = r.bodies[i%len(r.bodies)]
	}
	if len(r.headers) > 0 {
		r.header = r.headers[i%len(r.headers)]
	}
	return r
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

var nextID atomic.Int64

func newClient(conc int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc * 2, DisableCompression: true}}
}

// send posts req to url and drains the answer; a non-2xx status is an error.
func send(ctx context.Context, c *http.Client, url string, req request) error {
	body := fmt.Appendf(nil, req.body, nextID.Add(1))
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range req.header {
		hr.Header[k] = v
	}
	resp, err := c.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if req.want == nil {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
	} else {
		buf := bufPool.Get().(*bytes.Buffer)
		defer bufPool.Put(buf)
		buf.Reset()
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			return err
		}
		if resp.StatusCode/100 == 2 && !bytes.Contains(buf.Bytes(), req.want) {
			return fmt.Errorf("answer without %q: %.300s", req.want, buf.Bytes())
		}
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// load runs conc clients against url for d (and at most maxReqs requests
// when maxReqs > 0), recording every latency.
func load(ctx context.Context, c *http.Client, url string, req request, conc int, d time.Duration, maxReqs int) result {
	return loadRR(ctx, c, []string{url}, req, conc, d, maxReqs)
}

// loadRR is load with client-side round robin over urls: client i sends
// its k-th request to urls[(i+k)%len(urls)].
func loadRR(ctx context.Context, c *http.Client, urls []string, req request, conc int, d time.Duration, maxReqs int) result {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var total result
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := req.forClient(i)
			var r result
			for k := i; ctx.Err() == nil && (maxReqs <= 0 || r.requests+r.errors < maxReqs/conc); k++ {
				t0 := time.Now()
				err := send(ctx, c, urls[k%len(urls)], req)
				if ctx.Err() != nil {
					break // cut by the deadline: not a sample
				}
				if err != nil {
					r.errors++
					noteError(err)
					continue
				}
				r.requests++
				r.lat = append(r.lat, time.Since(t0))
			}
			mu.Lock()
			total.requests += r.requests
			total.errors += r.errors
			total.lat = append(total.lat, r.lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	total.elapsed = time.Since(start)
	return total
}

// firstErr is the first error any load met, for the report.
var firstErr atomic.Pointer[string]

func noteError(err error) {
	msg := err.Error()
	firstErr.CompareAndSwap(nil, &msg)
}

// warm loads every op for a second; each must answer cleanly.
func warm(ctx context.Context, c *http.Client, xs []op, conc int) error {
	for _, x := range xs {
		fmt.Fprintf(os.Stderr, "bench: warming up %s\n", x.name)
		r := load(ctx, c, x.url, x.req, conc, time.Second, 0)
		if r.requests == 0 || r.errors > 0 {
			return fmt.Errorf("%s: %d answers, %d errors during warm-up: %s", x.name, r.requests, r.errors, firstErrText())
		}
	}
	return nil
}

// firstErrText is firstErr's text, or "-".
func firstErrText() string {
	if p := firstErr.Load(); p != nil {
		return *p
	}
	return "-"
}

// errIf is a load's errors as an error, or nil.
func errIf(r result) error {
	if r.errors > 0 {
		return fmt.Errorf("%d errors: %s", r.errors, firstErrText())
	}
	return nil
}

// met is how a report says a target was met or missed.
func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// roundOrder is xs in round's order: reversed every other round, so no
// target always goes first.
func roundOrder[T any](xs []T, round int) []T {
	if round%2 == 1 {
		xs = slices.Clone(xs)
		slices.Reverse(xs)
	}
	return xs
}

// shortDefaults are the -duration and -latency-requests defaults of the
// modes that keep a whole run near 90 s on 2 cores, unless given.
func shortDefaults(o *options) {
	unlessGiven(o, "duration", &o.duration, 3*time.Second)
	unlessGiven(o, "latency-requests", &o.latencyReqs, 1000)
}

// unlessGiven sets *v to a mode's own default d for flag name, unless the
// flag was given on o's command line.
func unlessGiven[T any](o *options, name string, v *T, d T) {
	if !o.set[name] {
		*v = d
	}
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
