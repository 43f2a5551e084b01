package webhook

import (
	"math/rand/v2"
	"time"
)

func randFloat() float64 { return rand.Float64() }

// backoff is the wait before retry n (1 for the first) with "full
// jitter": a uniform random time up to min(max, first·2ⁿ⁻¹), so many
// deliveries failing at once against one receiver spread out rather than
// come back together (Standard Webhooks, "Retry schedule", recommends
// exponential backoff; the jitter is AWS Architecture Blog's "Exponential
// Backoff And Jitter"). The first retry comes within first.
func backoff(n int, first, maxWait time.Duration, r float64) time.Duration {
	ceil := first
	for i := 1; i < n && ceil < maxWait; i++ {
		ceil *= 2
	}
	ceil = min(ceil, maxWait)
	return time.Duration(r * float64(ceil))
}
