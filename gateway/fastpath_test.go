package gateway

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/taskstore"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

var fastpathParams = []string{
	``, `null`, `{}`, `[]`, `5`, `"x"`, `{"taskId":"a"}`, `{"taskId":null}`, `{"taskId":5}`,
	`{"taskId":"a","taskId":null}`, `{"taskId":null,"taskId":"a"}`, `{"TASKID":"b"}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"taskId":"t"}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":5}`,
	`{"_meta":5,"name":"x"}`, `{"_meta":[],"taskId":"t"}`, `{"_meta":null}`,
	`{"_meta":{"a":1},"_meta":5}`, `{"name":5,"_meta":{"a":1},"_meta":"x"}`,
	`{"taskId":"t","inputResponses":{"k":{}}}`, `{"taskId":"t","inputResponses":5}`,
	`{"taskId":"t","inputResponses":null}`, `{"taskId":"t","uri":3}`, `{"taskId":"t"`, `{"taskId":"t",}`,
}

func TestFastpathRequestMeta(t *testing.T) {
	for _, p := range fastpathParams {
		m := &mcpwire.Message{Params: json.RawMessage(p)}
		if got, want := m.Meta(), mcpwire.Meta(m.Params); !reflect.DeepEqual(got, want) {
			t.Errorf("params %s: requestMeta %v, want %v", p, got, want)
		}
	}
}

func TestFastpathValidateDecode(t *testing.T) {
	for _, p := range fastpathParams {
		var want struct {
			Meta   map[string]json.RawMessage `json:"_meta"`
			Name   *string                    `json:"name"`
			URI    *string                    `json:"uri"`
			TaskID *string                    `json:"taskId"`
		}
		var wantErr error
		if len(p) > 0 && p != "null" {
			wantErr = json.Unmarshal([]byte(p), &want)
		}
		m := &mcpwire.Message{Params: json.RawMessage(p)}
		got, err := m.RoutingParams()
		if (err != nil) != (wantErr != nil) {
			t.Errorf("params %s: error %v, want %v", p, err, wantErr)
			continue
		}
		if err == nil && (!reflect.DeepEqual(got.Meta, want.Meta) || !reflect.DeepEqual(got.Name, want.Name) ||
			!reflect.DeepEqual(got.URI, want.URI) || !reflect.DeepEqual(got.TaskID, want.TaskID)) {
			t.Errorf("params %s: decoded %+v, want %+v", p, got, want)
		}
		// The cache follows msg.Params.
		m.Params = json.RawMessage(`{"taskId":"other"}`)
		if got, _ := m.RoutingParams(); got.TaskID == nil || *got.TaskID != "other" {
			t.Errorf("params %s: cache not invalidated", p)
		}
	}
}

// TestFastpathTaskID: front2026.tasks's taskId is the one the full decode gives.
func TestFastpathTaskID(t *testing.T) {
	for _, p := range fastpathParams {
		var want struct {
			TaskID         string                     `json:"taskId"`
			InputResponses map[string]json.RawMessage `json:"inputResponses"`
		}
		if err := json.Unmarshal([]byte(p), &want); err != nil {
			want.TaskID = ""
		}
		m := &mcpwire.Message{Params: json.RawMessage(p)}
		var got string
		if mp, err := m.RoutingParams(); err == nil && mp.TaskID != nil && len(mp.InputResponses) == 0 {
			got = *mp.TaskID
		} else {
			got = want.TaskID // the slow path is the reference itself
		}
		if got != want.TaskID {
			t.Errorf("params %s: taskId %q, want %q", p, got, want.TaskID)
		}
	}
}

func TestFastpathWriteMarshalled(t *testing.T) {
	results := []any{
		map[string]string{"resultType": "complete"},
		core.Task2026{TaskID: "x<y>&z", Status: "completed", Result: json.RawMessage(`{"content":[{"type":"text","text":"a <b> & \u2028"}], "resultType" : "complete"}`)},
		nil, []int{1, 2}, "s",
	}
	ids := []string{`1`, `-2`, `1.5e3`, `"abc"`, `"a b"`, `"a<b"`, `"\u0041"`, `null`, `"é"`, `"a&b"`}
	for _, id := range ids {
		for _, res := range results {
			raw, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			want := httptest.NewRecorder()
			mcpwire.WriteJSON(want, 200, mcpwire.Response{JSONRPC: "2.0", ID: json.RawMessage(id), Result: raw})
			got := httptest.NewRecorder()
			mcpwire.WriteResult(got, json.RawMessage(id), res)
			if got.Body.String() != want.Body.String() || got.Code != want.Code ||
				!reflect.DeepEqual(got.Header(), want.Header()) {
				t.Errorf("id %s, result %v:\n got %d %v %s\nwant %d %v %s", id, res, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
			}
		}
	}
}

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
	h := newRenderCache(renderCacheEntries, renderCacheBytes)
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
	c := newRenderCache(8, 4096)
	for i := 0; i < 100; i++ {
		task := *renderTasks()[0]
		task.ID = fmt.Sprint("task-", i)
		if i%10 == 0 {
			task.Result = json.RawMessage(`{"text":"` + strings.Repeat("x", 3000) + `"}`)
		}
		if _, err := c.render(render2026Get, &task, 0, func() ([]byte, error) { return json.Marshal(core.ToTask2026(&task, "complete", true)) }); err != nil {
			t.Fatal(err)
		}
		if len(c.entries) > 8 || c.bytes > 4096 || c.lru.Len() != len(c.entries) {
			t.Fatalf("after %d: %d entries, %d bytes, lru %d", i, len(c.entries), c.bytes, c.lru.Len())
		}
	}
}

// TestFastpathScalars: the id and version shortcuts agree with the decode.
func TestFastpathScalars(t *testing.T) {
	for _, b := range []string{`0`, `1`, `-1`, `-0`, `01`, `-01`, `-`, ``, `12345678901234567890123`, `1.5`, `1e3`, `-1e-3`,
		`0x1`, `1a`, `+1`, ` 1`, `"1"`, `true`, `null`, `--1`, `00`} {
		var n json.Number
		if got, want := mcpwire.IsNumber([]byte(b)), json.Unmarshal([]byte(b), &n) == nil; got != want {
			t.Errorf("mcpwire.IsNumber(%s) = %v, want %v", b, got, want)
		}
	}
	for _, b := range []string{`"2026-07-28"`, `""`, `"a\"b"`, `"a\\b"`, `"\u0041"`, `"é"`, "\"\xff\"", "\"a\tb\"", `"a<b>&"`,
		`"`, `"x`, `x"`, `5`, `null`, `{}`, "\"\x7f\""} {
		var got, want string
		ok := mcpwire.PlainString(json.RawMessage(b), &got)
		werr := json.Unmarshal([]byte(b), &want)
		if ok && (werr != nil || got != want) {
			t.Errorf("mcpwire.PlainString(%s) = %q, want %q (%v)", b, got, want, werr)
		}
	}
}

// TestDeclaresTasksMemo: the remembered answer is the decode's, whatever
// the order of the capabilities seen.
func TestDeclaresTasksMemo(t *testing.T) {
	caps := []string{`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, `{}`, `{"extensions":{"io.modelcontextprotocol/tasks":true}}`,
		`{"Extensions":{"io.modelcontextprotocol/tasks":{}}}`, `{"extensions":5}`, `[]`, `{"extensions":{"io.modelcontextprotocol/tasks":{"a":1}}}`}
	for i := 0; i < 3; i++ {
		for _, c := range caps {
			for j := 0; j < 2; j++ {
				if got, want := declaresTasks(json.RawMessage(c)), declaresTasksDecode(json.RawMessage(c)); got != want {
					t.Errorf("declaresTasks(%s) = %v, want %v", c, got, want)
				}
			}
		}
	}
}

// BenchmarkTasksGetRender: a completed task's tasks/get result rendered
// afresh against the render cache (a hit, as on every poll but the first).
func BenchmarkTasksGetRender(b *testing.B) {
	task := renderTasks()[0]
	h := newRenderCache(renderCacheEntries, renderCacheBytes)
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

// BenchmarkFastpathScalars: the id, version and capabilities shortcuts
// against the decodes they skip.
func BenchmarkFastpathScalars(b *testing.B) {
	id, ver := []byte(`12345`), json.RawMessage(`"2026-07-28"`)
	caps := json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}},"elicitation":{}}`)
	var n json.Number
	var s string
	b.Run("id/decode", func(b *testing.B) {
		for b.Loop() {
			_ = json.Unmarshal(id, &n)
		}
	})
	b.Run("id/isNumber", func(b *testing.B) {
		for b.Loop() {
			_ = mcpwire.IsNumber(id)
		}
	})
	b.Run("version/decode", func(b *testing.B) {
		for b.Loop() {
			_ = json.Unmarshal(ver, &s)
		}
	})
	b.Run("version/plainString", func(b *testing.B) {
		for b.Loop() {
			_ = mcpwire.PlainString(ver, &s)
		}
	})
	b.Run("caps/decode", func(b *testing.B) {
		for b.Loop() {
			_ = declaresTasksDecode(caps)
		}
	})
	b.Run("caps/memo", func(b *testing.B) {
		for b.Loop() {
			_ = declaresTasks(caps)
		}
	})
}
