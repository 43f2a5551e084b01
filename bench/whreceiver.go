package main

// The webhook receivers of -mode webhooks (webhooks.go): this program
// re-executed in the "whreceiver" role, a separate process so that its
// work is not the load generator's. -target says how it answers every
// POST: "500" (HTTP 500 at once: every delivery fails and is retried) or a
// duration such as "10s" (the answer, 204, comes that much later: with
// taskgate's default --webhook-timeout of 10 s the delivery times out).
// GET /stats answers "posts <n> inflight <n>".

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// receiverAnswer is how a receiver answers, from its -target.
type receiverAnswer struct {
	status int           // 500, or 0: answer 204 after delay
	delay  time.Duration // with status 0
}

func parseReceiverAnswer(s string) (receiverAnswer, error) {
	if s == "500" {
		return receiverAnswer{status: http.StatusInternalServerError}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return receiverAnswer{}, fmt.Errorf("-role whreceiver: -target %q: want 500 or a duration such as 10s", s)
	}
	return receiverAnswer{delay: d}, nil
}

func serveReceiver(listen, answer string) error {
	a, err := parseReceiverAnswer(answer)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	return http.Serve(ln, receiverHandler(a))
}

func receiverHandler(a receiverAnswer) http.Handler {
	var posts, inflight atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/stats" {
			fmt.Fprintf(w, "posts %d inflight %d\n", posts.Load(), inflight.Load())
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		posts.Add(1)
		inflight.Add(1)
		defer inflight.Add(-1)
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		if a.status != 0 {
			w.WriteHeader(a.status)
			return
		}
		select {
		case <-time.After(a.delay):
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done(): // the sender gave up (its timeout)
		}
	})
}

// receiverPosts reads a receiver's POST count from its /stats.
func receiverPosts(addr string) (int64, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/stats")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var n, in int64
	if _, err := fmt.Fscanf(resp.Body, "posts %d inflight %d", &n, &in); err != nil {
		return 0, fmt.Errorf("receiver %s: /stats: %w", addr, err)
	}
	return n, nil
}
