package runner

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// notifyRig is a runner with only its store (a real redis-server), whose
// Redis commands are counted.
func notifyRig(t *testing.T) (*Runner, *taskstore.Store, *atomic.Int64) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t)})
	t.Cleanup(func() { rdb.Close() })
	var n atomic.Int64
	rdb.AddHook(redistest.CountHook{N: &n})
	store := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { store.Close() })
	return &Runner{Params: Params{Store: store}}, store, &n
}

// nextMessage is the next message published to w, or fails the test.
func nextMessage(t *testing.T, w *taskstore.Watch) string {
	t.Helper()
	for {
		select {
		case ev, ok := <-w.C:
			if !ok {
				t.Fatal("the watch closed")
			}
			if ev.Kind == taskstore.EventMessage {
				return ev.Data
			}
		case <-time.After(10 * time.Second): // a bound on a hang, not a timed assertion
			t.Fatal("no message published")
		}
	}
}

// TestNotifyOnly2025Tasks: the runner tells a 2025-11-25 task's session of
// its status (notifications/tasks/status with the Task as stored) and
// progress (with related-task _meta); for a 2026-07-28 or fallback task,
// which has nobody to tell, it sends Redis nothing at all, not even the
// read of the task.
func TestNotifyOnly2025Tasks(t *testing.T) {
	rn, store, sent := notifyRig(t)
	ctx := context.Background()
	job := func(proto taskstore.Protocol) *Job {
		t.Helper()
		task, err := store.Create(ctx, taskstore.NewTask{Owner: "o", Tool: "slow", Protocol: proto,
			Upstream: taskstore.Upstream{SessionID: "s1"}})
		if err != nil {
			t.Fatal(err)
		}
		return &Job{Owner: "o", Task: task, Sess: &upstream.Session{ID: "s1"}}
	}
	progress := json.RawMessage(`{"progressToken":"p","progress":1,"total":2}`)

	for _, proto := range []taskstore.Protocol{taskstore.Protocol2026, taskstore.ProtocolFallback} {
		j := job(proto)
		before := sent.Load()
		rn.notifyStatusByID(ctx, j)
		rn.progress(ctx, j, progress)
		rn.logMessage(ctx, j, json.RawMessage(`{"level":"info","data":"x"}`))
		if n := sent.Load() - before; n != 0 {
			t.Errorf("%s task: %d Redis commands for its notifications, want none", proto, n)
		}
	}

	j := job(taskstore.Protocol2025)
	w, err := store.WatchSession(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rn.notifyStatusByID(ctx, j)
	var status struct {
		Method string `json:"method"`
		Params struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"params"`
	}
	if msg := nextMessage(t, w); json.Unmarshal([]byte(msg), &status) != nil || status.Method != "notifications/tasks/status" ||
		status.Params.TaskID != j.Task.ID || status.Params.Status != "working" {
		t.Errorf("status notification = %s, want notifications/tasks/status of %s, working", msg, j.Task.ID)
	}
	rn.progress(ctx, j, progress)
	if msg := nextMessage(t, w); !strings.Contains(msg, `"notifications/progress"`) ||
		!strings.Contains(msg, `"io.modelcontextprotocol/related-task":{"taskId":"`+j.Task.ID+`"}`) {
		t.Errorf("progress notification = %s, want notifications/progress with related-task _meta", msg)
	}
}
