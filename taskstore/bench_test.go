package taskstore

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
)

// BenchmarkStore measures the store against a real redis-server on loopback,
// one unpipelined client (each op waits for its reply), next to raw go-redis
// HSET and HGETALL round trips in the same run. Targets: Create and Complete
// one EVALSHA round trip each; Get >= 0.8x raw HGETALL.
//
//	go test -run '^$' -bench BenchmarkStore -benchtime 2s ./taskstore/
func BenchmarkStore(b *testing.B) {
	srv := redistest.New(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	s := New(rdb, Options{MaxTasksPerOwner: -1})
	defer s.Close()
	defer func() {
		// Server-side cost per command, for the closing note.
		if testing.Verbose() {
			info, _ := rdb.Info(ctx, "commandstats").Result()
			b.Log(info)
		}
	}()
	result := json.RawMessage(`{"content":[{"type":"text","text":"the answer is 42"}],"isError":false}`)
	opsPerSec := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	}
	fresh := func(b *testing.B) {
		b.Helper()
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("Create", func(b *testing.B) {
		fresh(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.Create(ctx, NewTask{Owner: "bench", Tool: "slow", Protocol: Protocol2026, TTL: time.Hour}); err != nil {
				b.Fatal(err)
			}
		}
		opsPerSec(b)
	})

	b.Run("CreateWithLease", func(b *testing.B) {
		fresh(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.Create(ctx, NewTask{Owner: "bench", Tool: "slow", Lease: &LeaseRequest{Holder: "r1", Duration: time.Minute}}); err != nil {
				b.Fatal(err)
			}
		}
		opsPerSec(b)
	})

	b.Run("Get", func(b *testing.B) {
		fresh(b)
		task := mustCreateB(b, s)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.Get(ctx, "bench", task.ID); err != nil {
				b.Fatal(err)
			}
		}
		opsPerSec(b)
	})

	b.Run("AnswerInputs", func(b *testing.B) {
		fresh(b)
		// One task per 1000 answers, each with 1000 outstanding requests.
		type slot struct{ id, key string }
		slots := make([]slot, 0, b.N)
		for len(slots) < b.N {
			task := mustCreateB(b, s)
			reqs := map[string]InputRequest{}
			for j := 0; j < 1000 && len(slots) < b.N; j++ {
				k := "elicit-" + strconv.Itoa(j)
				reqs[k] = InputRequest{Method: "elicitation/create", Params: json.RawMessage(`{"message":"ok?"}`)}
				slots = append(slots, slot{task.ID, k})
			}
			if err := s.AddInputRequests(ctx, "bench", task.ID, reqs, "", ""); err != nil {
				b.Fatal(err)
			}
		}
		answer := json.RawMessage(`{"action":"accept","content":{"ok":true}}`)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			n, err := s.AnswerInputs(ctx, "bench", slots[i].id, map[string]json.RawMessage{slots[i].key: answer})
			if err != nil || n != 1 {
				b.Fatal(n, err)
			}
		}
		opsPerSec(b)
	})

	b.Run("Complete", func(b *testing.B) {
		fresh(b)
		ids := make([]string, b.N)
		for i := range ids {
			ids[i] = mustCreateB(b, s).ID
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := s.Complete(ctx, "bench", ids[i], result); err != nil {
				b.Fatal(err)
			}
		}
		opsPerSec(b)
	})

	b.Run("RawHSET", func(b *testing.B) {
		fresh(b)
		for i := 0; i < b.N; i++ {
			if err := rdb.HSet(ctx, "raw:hash", "status", "working").Err(); err != nil {
				b.Fatal(err)
			}
		}
		opsPerSec(b)
	})

	b.Run("RawEVALSHA", func(b *testing.B) {
		fresh(b)
		noop := redis.NewScript(`return {0}`)
		for i := 0; i < b.N; i++ {
			if err := noop.Run(ctx, rdb, []string{"raw:key"}).Err(); err != nil {
				b.Fatal(err)
			}
		}
		opsPerSec(b)
	})

	b.Run("RawHGETALL", func(b *testing.B) {
		fresh(b)
		// The same hash a task is, for a like-for-like reply size.
		task := mustCreateB(b, s)
		key := s.k.task("bench", task.ID)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := rdb.HGetAll(ctx, key).Err(); err != nil {
				b.Fatal(err)
			}
		}
		opsPerSec(b)
	})
}

// BenchmarkPaired alternates a store operation with its raw baseline op by
// op, so both see the same load: on a shared box the ratio is far steadier
// than comparing separate sub-benchmarks.
//
//	go test -run '^$' -bench BenchmarkPaired ./taskstore/
func BenchmarkPaired(b *testing.B) {
	srv := redistest.New(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	s := New(rdb, Options{MaxTasksPerOwner: -1})
	defer s.Close()
	noop := redis.NewScript(`return {0}`)
	if err := noop.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	evalsha := func() error { return noop.Run(ctx, rdb, []string{"raw:key"}).Err() }
	result := json.RawMessage(`{"content":[{"type":"text","text":"the answer is 42"}],"isError":false}`)

	paired := func(b *testing.B, name, baseName string, setup func(n int), op func(i int) error, base func() error) {
		setup(b.N)
		var tOp, tBase time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if err := op(i); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := base(); err != nil {
				b.Fatal(err)
			}
			tOp += t1.Sub(t0)
			tBase += time.Since(t1)
		}
		b.ReportMetric(float64(b.N)/tOp.Seconds(), name+"/s")
		b.ReportMetric(float64(b.N)/tBase.Seconds(), baseName+"/s")
		b.ReportMetric(tBase.Seconds()/tOp.Seconds(), "ratio")
	}

	b.Run("Get-vs-HGETALL", func(b *testing.B) {
		var key, id string
		paired(b, "get", "hgetall",
			func(int) { id = mustCreateB(b, s).ID; key = s.k.task("bench", id) },
			func(int) error { _, err := s.Get(ctx, "bench", id); return err },
			func() error { return rdb.HGetAll(ctx, key).Err() })
	})
	b.Run("Create-vs-EVALSHA", func(b *testing.B) {
		paired(b, "create", "evalsha", func(int) {},
			func(int) error { _, err := s.Create(ctx, NewTask{Owner: "bench", Tool: "slow"}); return err },
			evalsha)
	})
	b.Run("Complete-vs-EVALSHA", func(b *testing.B) {
		var ids []string
		paired(b, "complete", "evalsha",
			func(n int) {
				ids = make([]string, n)
				for i := range ids {
					ids[i] = mustCreateB(b, s).ID
				}
			},
			func(i int) error { return s.Complete(ctx, "bench", ids[i], result) },
			evalsha)
	})
	b.Run("AnswerInputs-vs-EVALSHA", func(b *testing.B) {
		var ids []string
		answer := map[string]json.RawMessage{"k": json.RawMessage(`{"action":"accept"}`)}
		paired(b, "answer", "evalsha",
			func(n int) {
				ids = make([]string, n)
				for i := range ids {
					ids[i] = mustCreateB(b, s).ID
					if err := s.AddInputRequests(ctx, "bench", ids[i], map[string]InputRequest{"k": {Method: "elicitation/create"}}, "", ""); err != nil {
						b.Fatal(err)
					}
				}
			},
			func(i int) error { _, err := s.AnswerInputs(ctx, "bench", ids[i], answer); return err },
			evalsha)
	})
}

func mustCreateB(b *testing.B, s *Store) *Task {
	b.Helper()
	t, err := s.Create(ctx, NewTask{Owner: "bench", Tool: "slow", Protocol: Protocol2026})
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// BenchmarkLeaseRenewal: renewing the leases of 1,000 held tasks against a
// real redis-server, one script call per task (Extend, as each worker did
// before) vs one pipeline (ExtendMany, what the runner does each period).
//
//	go test -run '^$' -bench BenchmarkLeaseRenewal ./taskstore/
func BenchmarkLeaseRenewal(b *testing.B) {
	srv := redistest.New(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	s := New(rdb, Options{MaxTasksPerOwner: -1})
	defer s.Close()
	const held = 1000
	refs := make([]LeaseRef, held)
	for i := range refs {
		t, err := s.Create(ctx, NewTask{Owner: "bench", Tool: "slow", Protocol: Protocol2026, Lease: &LeaseRequest{Holder: "r1", Duration: time.Minute}})
		if err != nil {
			b.Fatal(err)
		}
		refs[i] = LeaseRef{Owner: "bench", ID: t.ID}
	}
	b.Run("per-task", func(b *testing.B) {
		for b.Loop() {
			for _, r := range refs {
				if err := s.Extend(ctx, r.Owner, r.ID, "r1", time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("batched", func(b *testing.B) {
		for b.Loop() {
			for _, err := range s.ExtendMany(ctx, refs, "r1", time.Minute) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkWebhooks measures what recording webhook events costs the hot
// path: Create and Complete with Options.Webhooks on, each paired in the
// same loop with the same call on a store with it off (same redis-server,
// same client). ratio = on/off time; the goal is at most 1.1 (the event is
// one XADD inside the script and one SADD in its pipeline).
//
//	go test -run '^$' -bench BenchmarkWebhooks ./taskstore/
func BenchmarkWebhooks(b *testing.B) {
	srv := redistest.New(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	off := New(rdb, Options{MaxTasksPerOwner: -1})
	defer off.Close()
	on := New(rdb, Options{MaxTasksPerOwner: -1, Webhooks: true})
	defer on.Close()
	result := json.RawMessage(`{"content":[{"type":"text","text":"the answer is 42"}],"isError":false}`)
	paired := func(b *testing.B, op func(s *Store, owner string, i int) error) {
		var tOn, tOff time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if err := op(off, "off", i); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := op(on, "on", i); err != nil {
				b.Fatal(err)
			}
			tOff += t1.Sub(t0)
			tOn += time.Since(t1)
		}
		b.ReportMetric(float64(b.N)/tOff.Seconds(), "off/s")
		b.ReportMetric(float64(b.N)/tOn.Seconds(), "on/s")
		b.ReportMetric(tOn.Seconds()/tOff.Seconds(), "ratio")
	}
	b.Run("Create", func(b *testing.B) {
		paired(b, func(s *Store, owner string, _ int) error {
			_, err := s.Create(ctx, NewTask{Owner: owner, Tool: "slow", Trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
			return err
		})
	})
	b.Run("Complete", func(b *testing.B) {
		ids := map[string][]string{}
		for _, st := range []struct {
			s     *Store
			owner string
		}{{off, "off"}, {on, "on"}} {
			for i := 0; i < b.N; i++ {
				t, err := st.s.Create(ctx, NewTask{Owner: st.owner, Tool: "slow"})
				if err != nil {
					b.Fatal(err)
				}
				ids[st.owner] = append(ids[st.owner], t.ID)
			}
		}
		paired(b, func(s *Store, owner string, i int) error { return s.Complete(ctx, owner, ids[owner][i], result) })
	})
}
