package front

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// renderTasks are tasks of every status with the payloads that reach the
// rendering: results a legacy upstream sent (no resultType), HTML to
// escape, failures with and without an error object.
func renderTasks() []*taskstore.Task {
	at := time.UnixMilli(1767225600123).UTC()
	base := taskstore.Task{ID: "0b8f7c1e-task<&>", CreatedAt: at, LastUpdatedAt: at.Add(1500 * time.Millisecond),
		TTL: time.Hour, PollInterval: 500 * time.Millisecond}
	var ts []*taskstore.Task
	add := func(f func(*taskstore.Task)) {
		t := base
		f(&t)
		ts = append(ts, &t)
	}
	add(func(t *taskstore.Task) {
		t.Status = taskstore.StatusCompleted
		t.Result = json.RawMessage(`{"content":[{"type":"text","text":"a <b> & \u2028"}], "isError" : false}`)
	})
	add(func(t *taskstore.Task) {
		t.Status = taskstore.StatusCompleted
		t.Result = json.RawMessage(`{"content":[],"resultType":"complete","structuredContent":{"z":1,"a":[1,2]}}`)
	})
	add(func(t *taskstore.Task) { t.Status = taskstore.StatusCompleted })
	add(func(t *taskstore.Task) { t.Status = taskstore.StatusCompleted; t.Result = json.RawMessage(`[1,2]`) })
	add(func(t *taskstore.Task) {
		t.Status = taskstore.StatusFailed
		t.StatusMessage = "upstream <failed> \"x\""
	})
	add(func(t *taskstore.Task) {
		t.Status = taskstore.StatusFailed
		t.Error = json.RawMessage(`{"code":-32603,"message":"boom"}`)
	})
	add(func(t *taskstore.Task) {
		t.Status = taskstore.StatusCancelled
		t.StatusMessage = "The task was cancelled by request."
		t.PollInterval = 0
	})
	add(func(t *taskstore.Task) { t.Status = taskstore.StatusWorking })
	add(func(t *taskstore.Task) {
		t.Status = taskstore.StatusInputRequired
		t.InputRequests = map[string]taskstore.InputRequest{"k": {Method: "elicitation/create", Params: json.RawMessage(`{"a":1}`)}}
	})
	return ts
}

// TestRenderCacheBytes: a tasks/get answer, from the render cache cold or
// warm, is byte for byte writeResult of the rendering done afresh; a task
// whose fields changed is rendered again, never served stale.
func TestRenderCacheBytes(t *testing.T) {
	h := NewRenderCache(CacheEntries, CacheBytes)
	check := func(name string, task *taskstore.Task, id string) {
		t.Helper()
		for _, f := range []struct {
			name   string
			want   any
			render func(*taskstore.Task, uint64) ([]byte, error)
		}{
			{"modern", core.ToTask2026(task, "complete", true), h.get2026},
			{"legacy", core.ToTask2025(task), h.get2025},
		} {
			want := httptest.NewRecorder()
			mcpwire.WriteResult(want, json.RawMessage(id), f.want)
			for pass := 0; pass < 2; pass++ { // cold, then warm
				got := httptest.NewRecorder()
				raw, err := f.render(task, 0)
				if err != nil {
					t.Fatal(err)
				}
				mcpwire.WriteMarshalled(got, json.RawMessage(id), raw)
				if got.Body.String() != want.Body.String() || got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) {
					t.Errorf("%s %s %s pass %d id %s:\n got %d %v %s\nwant %d %v %s", name, f.name, task.Status, pass, id,
						got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
				}
			}
		}
	}
	for i, task := range renderTasks() {
		for _, id := range []string{`1`, `"a<b"`, `"x"`} {
			check(fmt.Sprint("task ", i), task, id)
		}
	}
	// Every rendered field changed on a cached terminal task: rendered anew.
	mutations := []func(*taskstore.Task){
		func(t *taskstore.Task) { t.Status = taskstore.StatusFailed },
		func(t *taskstore.Task) { t.StatusMessage = "changed" },
		func(t *taskstore.Task) { t.CreatedAt = t.CreatedAt.Add(time.Millisecond) },
		func(t *taskstore.Task) { t.LastUpdatedAt = t.LastUpdatedAt.Add(time.Millisecond) },
		func(t *taskstore.Task) { t.TTL += time.Millisecond },
		func(t *taskstore.Task) { t.PollInterval += time.Millisecond },
		func(t *taskstore.Task) { t.Result = json.RawMessage(`{"content":[{"type":"text","text":"other"}]}`) },
		func(t *taskstore.Task) { t.Error = json.RawMessage(`{"code":1,"message":"m"}`) },
		func(t *taskstore.Task) { t.Result = nil },
	}
	for i, mut := range mutations {
		task := *renderTasks()[0]
		check(fmt.Sprint("mutation ", i, " before"), &task, `7`)
		mut(&task)
		check(fmt.Sprint("mutation ", i, " after"), &task, `7`)
	}
}

// TestRenderCacheBounds: the cache stays within its entry and byte limits.
func TestRenderCacheBounds(t *testing.T) {
	c := NewRenderCache(8, 4096)
	for i := 0; i < 100; i++ {
		task := *renderTasks()[0]
		task.ID = fmt.Sprint("task-", i)
		if i%10 == 0 {
			task.Result = json.RawMessage(`{"text":"` + strings.Repeat("x", 3000) + `"}`)
		}
		if _, err := c.render(Render2026Get, &task, 0, func() ([]byte, error) { return json.Marshal(core.ToTask2026(&task, "complete", true)) }); err != nil {
			t.Fatal(err)
		}
		if len(c.entries) > 8 || c.bytes > 4096 || c.lru.Len() != len(c.entries) {
			t.Fatalf("after %d: %d entries, %d bytes, lru %d", i, len(c.entries), c.bytes, c.lru.Len())
		}
	}
}

// BenchmarkTasksGetRender: a completed task's tasks/get result rendered
// afresh against the render cache (a hit, as on every poll but the first).
func BenchmarkTasksGetRender(b *testing.B) {
	task := renderTasks()[0]
	h := NewRenderCache(CacheEntries, CacheBytes)
	for _, c := range []struct {
		name   string
		render func() ([]byte, error)
	}{
		{"modern/fresh", func() ([]byte, error) { return json.Marshal(core.ToTask2026(task, "complete", true)) }},
		{"modern/cached", func() ([]byte, error) { return h.get2026(task, 0) }},
		{"legacy/fresh", func() ([]byte, error) { return json.Marshal(core.ToTask2025(task)) }},
		{"legacy/cached", func() ([]byte, error) { return h.get2025(task, 0) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.render(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
