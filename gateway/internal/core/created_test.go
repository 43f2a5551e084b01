package core

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseCreateTaskResult: whatever an upstream answers a task-augmented
// call with, the check never panics; what it accepts has a task id of at
// most 256 bytes and a task status, and is the answer's own task object.
func FuzzParseCreateTaskResult(f *testing.F) {
	for _, s := range []string{
		`{"task":{"taskId":"t1","status":"working","createdAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1000}}`,
		`{"task":{"taskId":42,"status":"working"}}`,
		`{"task":{"taskId":"t","status":"sleeping"}}`,
		`{"task":{"taskId":"t","status":"working","ttl":-1}}`,
		`{"task":null}`, `{"content":[]}`, `[]`, `"x"`, `{"task":{"taskId":""}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		task, raw, err := ParseCreateTaskResult(b)
		if err != nil {
			if task != nil || raw != nil || err.Error() == "" {
				t.Fatalf("error %v with a task %+v", err, task)
			}
			return
		}
		if task.TaskID == "" || len(task.TaskID) > 256 || task.Status == "" {
			t.Fatalf("accepted %+v from %s", task, b)
		}
		var again createdTask
		if json.Unmarshal(raw, &again) != nil || again.TaskID != task.TaskID {
			t.Fatalf("raw task %s is not the accepted one %+v", raw, task)
		}
	})
}

// FuzzParseCreateTaskResult2026: the same for the tasks extension's
// CreateTaskResult (the task's members at the top of the result).
func FuzzParseCreateTaskResult2026(f *testing.F) {
	for _, s := range []string{
		`{"resultType":"task","taskId":"t1","status":"working","createdAt":"2026-01-01T00:00:00Z","ttlMs":60000,"pollIntervalMs":100}`,
		`{"resultType":"task","taskId":7,"status":"working"}`, `{"resultType":"task","taskId":"t","status":"done"}`,
		`{"resultType":"task","taskId":"t","status":"working","ttlMs":-1}`, `{"resultType":"task"}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		task, err := ParseCreateTaskResult2026(b)
		if err != nil {
			if task != nil || err.Error() == "" {
				t.Fatalf("error %v with a task %+v", err, task)
			}
			return
		}
		if task.TaskID == "" || len(task.TaskID) > 256 || task.Status == "" || task.TTLMs != nil && *task.TTLMs < 0 {
			t.Fatalf("accepted %+v from %s", task, b)
		}
	})
}

// TestParseCreateTaskResultErrors: each way a CreateTaskResult can be
// wrong is named.
func TestParseCreateTaskResultErrors(t *testing.T) {
	for in, want := range map[string]string{
		`[]`:                            "not an object",
		`{"content":[]}`:                "has no task",
		`{"task":{"taskId":42}}`:        "task is malformed",
		`{"task":{"status":"working"}}`: "no taskId",
		`{"task":{"taskId":"t"}}`:       `status "" is not a task status`,
		`{"task":{"taskId":"t","status":"working","ttl":-5}}`:                       "negative",
		`{"task":{"taskId":"` + strings.Repeat("x", 257) + `","status":"working"}}`: "257 bytes",
	} {
		if _, _, err := ParseCreateTaskResult([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40s: %v, want %q", in, err, want)
		}
	}
}
