package taskstore

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
)

// TestCompleteCancelRace: 50 goroutines race Complete against RequestCancel
// on one task; exactly one terminal outcome wins, every round, and the
// record agrees with the winner.
func TestCompleteCancelRace(t *testing.T) {
	rounds := 100
	if testing.Short() {
		rounds = 20
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t, func(o *Options) { o.MaxTasksPerOwner = -1 })
		result := json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
		for round := 0; round < rounds; round++ {
			task := mustCreate(t, s, "o")
			var (
				wg              sync.WaitGroup
				start           = make(chan struct{})
				mu              sync.Mutex
				completed, canc int
				others          []error
			)
			for g := 0; g < 50; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					<-start
					var err error
					if g%2 == 0 {
						err = s.Complete(ctx, "o", task.ID, result)
					} else {
						_, err = s.RequestCancel(ctx, "o", task.ID, "")
					}
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil && g%2 == 0:
						completed++
					case err == nil:
						canc++
					case !errors.Is(err, ErrTerminal):
						others = append(others, err)
					}
				}(g)
			}
			close(start)
			wg.Wait()
			if len(others) > 0 {
				t.Fatalf("round %d: unexpected errors: %v", round, others)
			}
			if completed+canc != 1 {
				t.Fatalf("round %d: %d completes and %d cancels succeeded, want exactly one", round, completed, canc)
			}
			h := e.hash(s.k.task("o", task.ID))
			switch {
			case completed == 1 && (h["status"] != "completed" || h["result"] != string(result) || h["cancel"] != ""):
				t.Fatalf("round %d: complete won but raw = %v", round, h)
			case canc == 1 && (h["status"] != "cancelled" || h["result"] != "" || h["cancel"] != "1"):
				t.Fatalf("round %d: cancel won but raw = %v", round, h)
			}
		}
	})
}
