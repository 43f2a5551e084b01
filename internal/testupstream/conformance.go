package testupstream

// The fixture tools of the official conformance suite's tasks scenarios
// (@modelcontextprotocol/conformance, tasks-*), as a server without tasks
// of its own would have them, so that the suite can run against taskgate
// in front of this upstream (with rules that give each tool its task mode:
// ConformanceFlags). In either era: a session upstream asks with
// server→client requests, a stateless one with input_required rounds.
// Times are set against a gateway hybrid wait well under
// ConformanceWorkTime: what must answer at once does, what must become a
// task works longer first. test_tool_with_task, whose question must come
// back at once as an MRTR round before its task, has a hybrid wait of its
// own (ConformancePolicy): long, so that no busy machine stretches its
// round past it, and its work after the answer outlasts it.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ConformanceWorkTime is how long the fixtures that must become tasks work
// before they answer or ask.
const ConformanceWorkTime = time.Second

// ConformanceFlags are the taskgate rules that give the fixtures the task
// modes the scenarios expect (failing_job requires a task; the others that
// must be tasks are, by the hybrid wait: under the 1 s of slow_compute's
// shortest task, well over the time a fixture takes to ask at once).
var ConformanceFlags = []string{"--task-required", "failing_job", "--sync", "greet", "--hybrid-wait", "500ms"}

// ConformanceComposeWait is test_tool_with_task's hybrid wait
// (ConformancePolicy): the longest its question may take to come back as
// an MRTR round. Its work after the answer takes ConformanceWorkTime
// longer, so that the retry becomes the task.
const ConformanceComposeWait = 5 * time.Second

// ConformancePolicy is the rules file (--policy) that goes with
// ConformanceFlags: test_tool_with_task is auto, with
// ConformanceComposeWait.
var ConformancePolicy = `{"rules": [{"tool": "test_tool_with_task", "mode": "auto", "hybridWait": "` + ConformanceComposeWait.String() + `"}]}`

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type computeIn struct {
	Seconds float64 `json:"seconds,omitempty" jsonschema:"how long to compute"`
	Label   string  `json:"label,omitempty" jsonschema:"a label for the result"`
}

type deleteIn struct {
	Filename string `json:"filename,omitempty" jsonschema:"the file to delete"`
}

type asksIn struct {
	N int `json:"n" jsonschema:"how many questions to ask, one after another"`
}

// addConformance registers the fixture tools.
func addConformance(s *mcp.Server, rec *Recorder) {
	add(s, rec, &mcp.Tool{Name: "greet", Description: "Greets by name, at once."}, func(_ context.Context, _ *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, error) {
		return text(fmt.Sprintf("Hello, %s!", in.Name)), nil
	})
	add(s, rec, &mcp.Tool{Name: "slow_compute", Description: "Computes for the given seconds."}, func(ctx context.Context, _ *mcp.CallToolRequest, in computeIn) (*mcp.CallToolResult, error) {
		if err := sleep(ctx, time.Duration(in.Seconds*float64(time.Second))); err != nil {
			return nil, err
		}
		return text(fmt.Sprintf("computed %s after %gs", in.Label, in.Seconds)), nil
	})
	add(s, rec, &mcp.Tool{Name: "failing_job", Description: "Works, then fails as a tool (isError)."}, func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, error) {
		if err := sleep(ctx, ConformanceWorkTime); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the job failed"}}}, nil
	})
	add(s, rec, &mcp.Tool{Name: "protocol_error_job", Description: "Works, then answers with a JSON-RPC error."}, func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, error) {
		if err := sleep(ctx, ConformanceWorkTime); err != nil {
			return nil, err
		}
		return nil, &jsonrpc.Error{Code: RPCErrorCode, Message: "protocol_error_job: deliberate JSON-RPC error"}
	})
	add(s, rec, &mcp.Tool{Name: "confirm_delete", Description: "Works, then asks to confirm a deletion."}, func(ctx context.Context, req *mcp.CallToolRequest, in deleteIn) (*mcp.CallToolResult, error) {
		if err := sleep(ctx, ConformanceWorkTime); err != nil {
			return nil, err
		}
		resp, pending, err := ask(ctx, req, "confirm", &mcp.ElicitParams{Mode: "form", Message: "Delete " + in.Filename + "?", RequestedSchema: confirmSchema})
		if pending != nil || err != nil {
			return pending, err
		}
		if er, ok := resp.(*mcp.ElicitResult); ok && er.Action == "accept" {
			return text("deleted " + in.Filename), nil
		}
		return text("kept " + in.Filename), nil
	})
	add(s, rec, &mcp.Tool{Name: "multi_input", Description: "Works, then asks two questions at once."}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, error) {
		if err := sleep(ctx, ConformanceWorkTime); err != nil {
			return nil, err
		}
		got, pending, err := askAll(ctx, req, map[string]mcp.InputRequest{
			"name":    &mcp.ElicitParams{Mode: "form", Message: "What is your name?", RequestedSchema: nameSchema},
			"confirm": &mcp.ElicitParams{Mode: "form", Message: "Go on?", RequestedSchema: confirmSchema},
		})
		if pending != nil || err != nil {
			return pending, err
		}
		return text(fmt.Sprintf("got %d answers", len(got))), nil
	})
	add(s, rec, &mcp.Tool{Name: "test_tool_with_task", Description: "Asks for a name at once, then works, then greets."}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, error) {
		resp, pending, err := ask(ctx, req, "user_name", &mcp.ElicitParams{Mode: "form", Message: "What is your name?", RequestedSchema: nameSchema})
		if pending != nil || err != nil {
			return pending, err
		}
		name := "nobody"
		if er, ok := resp.(*mcp.ElicitResult); ok && er.Action == "accept" {
			name, _ = er.Content["name"].(string)
		}
		if err := sleep(ctx, ConformanceComposeWait+ConformanceWorkTime); err != nil {
			return nil, err
		}
		return text(fmt.Sprintf("Hello, %s! (after the task's work)", name)), nil
	})
	// asks is for a session upstream: a stateless one, whose requestState
	// carries no progress, asks q1 again on every retry.
	add(s, rec, &mcp.Tool{Name: "asks", Description: "Asks n questions, one after another, then answers."}, func(ctx context.Context, req *mcp.CallToolRequest, in asksIn) (*mcp.CallToolResult, error) {
		for i := 1; i <= in.N; i++ {
			_, pending, err := ask(ctx, req, fmt.Sprintf("q%d", i), &mcp.ElicitParams{Mode: "form", Message: fmt.Sprintf("Question %d?", i), RequestedSchema: nameSchema})
			if pending != nil || err != nil {
				return pending, err
			}
		}
		return text(fmt.Sprintf("answered %d", in.N)), nil
	})
}

var confirmSchema = json.RawMessage(`{"type":"object","properties":{"confirm":{"type":"boolean","description":"Confirm?"}},"required":["confirm"]}`)

// sleep waits d, or until ctx ends (then its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
