package testupstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RPCErrorCode is the JSON-RPC error code the rpcerror tool answers with
// unless asked for another. It is in the implementation-defined server error
// range and clashes with no MCP-defined code.
const RPCErrorCode = -32099

// RPCErrorMessage is the message of the rpcerror tool's JSON-RPC error.
const RPCErrorMessage = "rpcerror: deliberate JSON-RPC error"

// FailText is the text of the fail tool's isError result.
const FailText = "tool failed: deliberate failure"

// DefaultSlowSeconds is how long slow sleeps when seconds is not given.
const DefaultSlowSeconds = 3.0

// modernVersion is the first protocol version without server→client requests
// (SEP-2322 multi round-trip requests replace them).
const modernVersion = "2026-07-28"

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

type slowIn struct {
	Seconds *float64 `json:"seconds,omitempty" jsonschema:"how long to sleep, in seconds (default 3)"`
	Text    string   `json:"text,omitempty" jsonschema:"text to include in the result"`
}

type progressIn struct {
	Steps   *int `json:"steps,omitempty" jsonschema:"number of progress notifications (default 3)"`
	DelayMs int  `json:"delayMs,omitempty" jsonschema:"pause before each notification, in milliseconds"`
}

type sampleIn struct {
	Prompt string `json:"prompt" jsonschema:"the prompt to sample"`
}

type rpcErrorIn struct {
	Code *int64 `json:"code,omitempty" jsonschema:"the JSON-RPC error code to answer with (default -32099)"`
}

type none struct{}

func addTools(s *mcp.Server, rec *Recorder) {
	add(s, rec, &mcp.Tool{Name: "echo", Description: "Returns its text."}, echo)
	add(s, rec, &mcp.Tool{Name: "slow", Description: "Sleeps, then returns."}, slow)
	add(s, rec, &mcp.Tool{Name: "elicit", Description: "Asks the user for a name with form elicitation."}, elicit)
	add(s, rec, &mcp.Tool{Name: "progress", Description: "Sends progress notifications, then returns."}, progress)
	add(s, rec, &mcp.Tool{Name: "sample", Description: "Asks the client to sample an LLM."}, sample)
	add(s, rec, &mcp.Tool{Name: "roots", Description: "Lists the client's roots."}, roots)
	add(s, rec, &mcp.Tool{Name: "fail", Description: "Returns a tool error (isError)."}, fail)
	add(s, rec, &mcp.Tool{Name: "rpcerror", Description: "Answers with a JSON-RPC error."}, rpcError)
}

// add registers h as tool t, recording its lifecycle in rec.
func add[In any](s *mcp.Server, rec *Recorder, t *mcp.Tool,
	h func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, error)) {
	mcp.AddTool(s, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		sid := req.Session.ID()
		rec.record(Event{Tool: t.Name, Kind: Called, Session: sid})
		res, err := h(ctx, req, in)
		kind := Completed
		switch {
		case ctx.Err() != nil:
			kind = Cancelled
		case err != nil:
			kind = Failed
		}
		rec.record(Event{Tool: t.Name, Kind: kind, Session: sid})
		return res, nil, err
	})
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func echo(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, error) {
	return text(in.Text), nil
}

func slow(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, error) {
	secs := DefaultSlowSeconds
	if in.Seconds != nil {
		secs = *in.Seconds
	}
	if secs < 0 {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "slow: seconds must not be negative"}
	}
	timer := time.NewTimer(time.Duration(secs * float64(time.Second)))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return text(fmt.Sprintf("slept %s s: %s", strconv.FormatFloat(secs, 'f', -1, 64), in.Text)), nil
}

func progress(ctx context.Context, req *mcp.CallToolRequest, in progressIn) (*mcp.CallToolResult, error) {
	steps := 3
	if in.Steps != nil {
		steps = *in.Steps
	}
	token := req.Params.GetProgressToken()
	for i := 1; i <= steps; i++ {
		if in.DelayMs > 0 {
			select {
			case <-time.After(time.Duration(in.DelayMs) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if token == nil {
			continue
		}
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      float64(i),
			Total:         float64(steps),
			Message:       fmt.Sprintf("step %d/%d", i, steps),
		})
		if err != nil {
			return nil, fmt.Errorf("progress: notify step %d: %w", i, err)
		}
	}
	return text(fmt.Sprintf("done %d", steps)), nil
}

// nameSchema is the form the elicit tool asks for.
var nameSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"Your name"}},"required":["name"]}`)

func elicit(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, error) {
	resp, pending, err := ask(ctx, req, "name", &mcp.ElicitParams{
		Mode:            "form",
		Message:         "What is your name?",
		RequestedSchema: nameSchema,
	})
	if pending != nil || err != nil {
		return pending, err
	}
	er, ok := resp.(*mcp.ElicitResult)
	if !ok {
		return nil, fmt.Errorf("elicit: got %T, want an elicitation result", resp)
	}
	switch er.Action {
	case "accept":
		name, _ := er.Content["name"].(string)
		return text(fmt.Sprintf("Hello, %s!", name)), nil
	case "decline":
		return text("elicitation declined"), nil
	default:
		return text("elicitation cancelled"), nil
	}
}

func sample(ctx context.Context, req *mcp.CallToolRequest, in sampleIn) (*mcp.CallToolResult, error) {
	resp, pending, err := ask(ctx, req, "sample", &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}},
		MaxTokens: 100,
	})
	if pending != nil || err != nil {
		return pending, err
	}
	var content []mcp.Content
	switch r := resp.(type) {
	case *mcp.CreateMessageResult:
		content = []mcp.Content{r.Content}
	case *mcp.CreateMessageWithToolsResult:
		content = r.Content
	default:
		return nil, fmt.Errorf("sample: got %T, want a sampling result", resp)
	}
	var parts []string
	for _, c := range content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return text(strings.Join(parts, "")), nil
}

func roots(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, error) {
	resp, pending, err := ask(ctx, req, "roots", &mcp.ListRootsParams{})
	if pending != nil || err != nil {
		return pending, err
	}
	lr, ok := resp.(*mcp.ListRootsResult)
	if !ok {
		return nil, fmt.Errorf("roots: got %T, want a roots result", resp)
	}
	uris := make([]string, 0, len(lr.Roots))
	for _, r := range lr.Roots {
		uris = append(uris, r.URI)
	}
	return text(strings.Join(uris, ",")), nil
}

func fail(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, error) {
	res := text(FailText)
	res.IsError = true
	return res, nil
}

func rpcError(_ context.Context, _ *mcp.CallToolRequest, in rpcErrorIn) (*mcp.CallToolResult, error) {
	code := int64(RPCErrorCode)
	if in.Code != nil {
		code = *in.Code
	}
	// A *jsonrpc.Error returned from a tool handler goes out as a JSON-RPC
	// error response, not as an isError result.
	return nil, &jsonrpc.Error{Code: code, Message: RPCErrorMessage, Data: json.RawMessage(`{"tool":"rpcerror"}`)}
}

// ask obtains one piece of client input the way the client's era allows:
//   - a retried modern call carries it in inputResponses[key];
//   - a modern (2026-07-28) client is asked with an input_required result,
//     returned as pending (SEP-2322 multi round-trip requests);
//   - a legacy client is asked with a server→client request on the call's
//     stream, as unmodified servers do today.
func ask(ctx context.Context, req *mcp.CallToolRequest, key string, ir mcp.InputRequest) (resp mcp.InputResponse, pending *mcp.CallToolResult, err error) {
	if r, ok := req.Params.InputResponses[key]; ok {
		return r, nil, nil
	}
	if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion >= modernVersion {
		return nil, &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{key: ir},
			RequestState:  "testupstream:" + req.Params.Name,
		}, nil
	}
	switch p := ir.(type) {
	case *mcp.ElicitParams:
		resp, err = req.Session.Elicit(ctx, p)
	case *mcp.CreateMessageParams:
		resp, err = req.Session.CreateMessage(ctx, p)
	case *mcp.ListRootsParams:
		resp, err = req.Session.ListRoots(ctx, p)
	default:
		err = errors.New("unsupported input request")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", req.Params.Name, err)
	}
	return resp, nil, nil
}

// colorSchema is the second form the elicit2 tool asks for.
var colorSchema = json.RawMessage(`{"type":"object","properties":{"color":{"type":"string","description":"Your favourite colour"}},"required":["color"]}`)

// Elicit2Questions are the messages of elicit2's two elicitations, by the
// key it asks them under (a modern client's inputRequests keys).
var Elicit2Questions = map[string]string{
	"name":  "What is your name?",
	"color": "What is your favourite colour?",
}

// Elicit2Text is elicit2's result for the two answers.
func Elicit2Text(name, color string) string {
	return fmt.Sprintf("Hello, %s! You like %s.", name, color)
}

// elicit2 asks two questions at once: a legacy client gets two concurrent
// elicitation/create requests on the call's stream, a modern client one
// input_required round with both in inputRequests (and, if it answers only
// one, another round with the one still missing).
func elicit2(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, error) {
	asks := map[string]mcp.InputRequest{
		"name":  &mcp.ElicitParams{Mode: "form", Message: Elicit2Questions["name"], RequestedSchema: nameSchema},
		"color": &mcp.ElicitParams{Mode: "form", Message: Elicit2Questions["color"], RequestedSchema: colorSchema},
	}
	resps, pending, err := askAll(ctx, req, asks)
	if pending != nil || err != nil {
		return pending, err
	}
	answer := func(key string) string {
		er, ok := resps[key].(*mcp.ElicitResult)
		switch {
		case !ok:
			return "(no answer)"
		case er.Action != "accept":
			return "(" + er.Action + ")"
		}
		v, _ := er.Content[key].(string)
		return v
	}
	return text(Elicit2Text(answer("name"), answer("color"))), nil
}

// askAll is ask for several inputs at once: a modern client gets one
// input_required round with every input its retry did not carry yet; a
// legacy client gets one server→client request per input, all sent
// concurrently, and askAll waits for every answer.
func askAll(ctx context.Context, req *mcp.CallToolRequest, asks map[string]mcp.InputRequest) (map[string]mcp.InputResponse, *mcp.CallToolResult, error) {
	got := map[string]mcp.InputResponse{}
	missing := mcp.InputRequestMap{}
	for key, ir := range asks {
		if r, ok := req.Params.InputResponses[key]; ok {
			got[key] = r
		} else {
			missing[key] = ir
		}
	}
	if len(missing) == 0 {
		return got, nil, nil
	}
	if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion >= modernVersion {
		return nil, &mcp.CallToolResult{InputRequests: missing, RequestState: "testupstream:" + req.Params.Name}, nil
	}
	type answer struct {
		key  string
		resp mcp.InputResponse
		err  error
	}
	answers := make(chan answer, len(missing))
	for key, ir := range missing {
		go func() {
			p, ok := ir.(*mcp.ElicitParams)
			if !ok {
				answers <- answer{key: key, err: errors.New("unsupported input request")}
				return
			}
			r, err := req.Session.Elicit(ctx, p)
			answers <- answer{key, r, err}
		}()
	}
	var firstErr error
	for range missing {
		a := <-answers
		if a.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s: %s: %w", req.Params.Name, a.key, a.err)
		}
		got[a.key] = a.resp
	}
	if firstErr != nil {
		return nil, nil, firstErr
	}
	return got, nil, nil
}
