package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskgate/taskgate/taskstore"
)

// createdTask is the task of a CreateTaskResult (MCP 2025-11-25, Tasks,
// "Creating Tasks"): what the gateway checks of the upstream's answer.
type createdTask struct {
	TaskID string   `json:"taskId"`
	Status string   `json:"status"`
	TTL    *float64 `json:"ttl"`
}

// ParseCreateTaskResult checks an upstream's answer to a task-augmented
// tools/call: a result whose task has a taskId (at most 256 bytes) and a
// known status. It returns the task and its raw object.
func ParseCreateTaskResult(result json.RawMessage) (*createdTask, json.RawMessage, error) {
	var res struct {
		Task json.RawMessage `json:"task"`
	}
	if err := json.Unmarshal(result, &res); err != nil {
		return nil, nil, errors.New("the result is not an object")
	}
	if len(res.Task) == 0 || bytes.Equal(res.Task, []byte("null")) {
		return nil, nil, errors.New("it has no task")
	}
	var t createdTask
	if err := json.Unmarshal(res.Task, &t); err != nil {
		return nil, nil, fmt.Errorf("its task is malformed: %v", err)
	}
	switch {
	case t.TaskID == "":
		return nil, nil, errors.New("its task has no taskId")
	case len(t.TaskID) > 256:
		return nil, nil, fmt.Errorf("its taskId is %d bytes long (at most 256)", len(t.TaskID))
	case !taskstore.Status(t.Status).Valid():
		return nil, nil, fmt.Errorf("its task's status %q is not a task status", t.Status)
	case t.TTL != nil && (*t.TTL < 0 || math.IsNaN(*t.TTL)):
		return nil, nil, fmt.Errorf("its task's ttl %v is negative", *t.TTL)
	}
	return &t, res.Task, nil
}

// QuoteAnswer is an upstream's answer shortened for an error message.
func QuoteAnswer(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// NotFoundWire reports whether a JSON-RPC error is -32602.
func NotFoundWire(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we) && we.Code == jsonrpc.CodeInvalidParams
}

// createdTask2026 is what the gateway checks of an upstream's
// CreateTaskResult (SEP-2663, "Task Creation": Result & Task).
type createdTask2026 struct {
	TaskID string   `json:"taskId"`
	Status string   `json:"status"`
	TTLMs  *float64 `json:"ttlMs"`
}

// ParseCreateTaskResult2026 checks a result whose resultType is "task".
func ParseCreateTaskResult2026(result json.RawMessage) (*createdTask2026, error) {
	var t createdTask2026
	if err := json.Unmarshal(result, &t); err != nil {
		return nil, fmt.Errorf("its task is malformed: %v", err)
	}
	switch {
	case t.TaskID == "":
		return nil, errors.New("it has no taskId")
	case len(t.TaskID) > 256:
		return nil, fmt.Errorf("its taskId is %d bytes long (at most 256)", len(t.TaskID))
	case !taskstore.Status(t.Status).Valid():
		return nil, fmt.Errorf("its status %q is not a task status", t.Status)
	case t.TTLMs != nil && (*t.TTLMs < 0 || math.IsNaN(*t.TTLMs)):
		return nil, fmt.Errorf("its ttlMs %v is negative", *t.TTLMs)
	}
	return &t, nil
}
