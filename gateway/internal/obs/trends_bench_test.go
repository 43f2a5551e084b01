package obs

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/taskstore"
)

// BenchmarkTrendsHotPath measures what the trends add to a task's own
// path: what the gateway records when a task is created and when it ends
// (Metrics.TaskCreated, TaskFinished), without and with the accumulator
// ("metrics"); and the same around the store's create and completion on a
// real redis-server ("store"), which is what a task costs the gateway.
// Compare on/off within one run (ns/op ratio); docs/console.md, "Trends".
func BenchmarkTrendsHotPath(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(b)})
	b.Cleanup(func() { rdb.Close() })
	st := taskstore.New(rdb, taskstore.Options{})
	b.Cleanup(func() { st.Close() })
	tools := make([]string, 20)
	for i := range tools {
		tools[i] = "tool-" + strconv.Itoa(i)
	}
	setup := func(on bool) *Metrics {
		m := NewMetrics(func() float64 { return 0 })
		if on {
			tr := NewTrends(TrendsParams{Store: st, Every: time.Second})
			tr.Start()
			b.Cleanup(tr.Stop)
			m.SetTrends(tr)
		}
		return m
	}
	b.Run("accumulator", func(b *testing.B) { // the trends' own share, alone
		tr := NewTrends(TrendsParams{Store: st})
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				tool := tools[i%len(tools)]
				tr.created(tool)
				tr.finished(tool, taskstore.StatusCompleted, 40*time.Millisecond)
				i++
			}
		})
	})
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run("metrics/"+name, func(b *testing.B) {
			m := setup(on)
			created := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					tool := tools[i%len(tools)]
					m.TaskCreated(tool, taskstore.Protocol2026)
					m.TaskFinished(&taskstore.Task{Tool: tool, CreatedAt: created}, taskstore.StatusCompleted, 0)
					i++
				}
			})
		})
	}
	// The store's create and completion and what the gateway records,
	// paired in one loop (off, then on, alternately) so the machine's
	// noise falls on both alike; on/off is their ratio.
	b.Run("store-paired", func(b *testing.B) {
		off, on := setup(false), setup(true)
		ctx := context.Background()
		var took [2]time.Duration
		for i := 0; i < b.N; i++ {
			tool := tools[i%len(tools)]
			for k, m := range []*Metrics{off, on} {
				start := time.Now()
				t, err := st.Create(ctx, taskstore.NewTask{Owner: "bench", Tool: tool})
				if err != nil {
					b.Fatal(err)
				}
				m.TaskCreated(tool, taskstore.Protocol2026)
				if err := st.Finish(ctx, "bench", t.ID, taskstore.StatusCompleted, taskstore.Outcome{Result: []byte(`{}`)}); err != nil {
					b.Fatal(err)
				}
				m.TaskFinished(t, taskstore.StatusCompleted, 0)
				took[k] += time.Since(start)
			}
		}
		b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N), "off-ns/task")
		b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N), "on-ns/task")
		b.ReportMetric(float64(took[1])/float64(took[0]), "on/off")
	})
}
