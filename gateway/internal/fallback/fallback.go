package fallback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// Config configures the fallback task tools.
type Config struct {
	// Enabled offers them; off, nothing of them is visible.
	Enabled bool
	// Prefix starts the four tool names; empty means DefaultPrefix.
	Prefix string
}

// DefaultPrefix starts the fallback tools' names.
const DefaultPrefix = "taskgate_"

const (
	fallbackWaitDefault = 10 * time.Second
	fallbackWaitMax     = 50 * time.Second
	maxTaskIDLen        = 128
)

// validToolName is the MCP tool name charset (MCP 2025-11-25, Tools, "Tool
// Names": 1 to 128 of A-Z a-z 0-9 _ - .).
var validToolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// ToolNames are the four tool names for prefix (empty: the
// default), or an error saying why prefix cannot make tool names.
func ToolNames(prefix string) ([]string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	n := newNames(prefix)
	out := []string{n.status, n.result, n.cancel, n.answer}
	for _, name := range out {
		if !validToolName.MatchString(name) {
			return nil, fmt.Errorf("Tools prefix %q makes the tool name %q, which MCP does not allow (1 to 128 of A-Z a-z 0-9 _ - .)", prefix, name)
		}
	}
	return out, nil
}

type names struct{ status, result, cancel, answer string }

func newNames(prefix string) names {
	return names{prefix + "task_status", prefix + "task_result", prefix + "task_cancel", prefix + "task_answer"}
}

// store is what the fallback tools need of the task store.
type store interface {
	Get(ctx context.Context, owner, id string) (*taskstore.Task, error)
	RequestCancel(ctx context.Context, owner, id, message string) (*taskstore.Task, error)
	AnswerInputs(ctx context.Context, owner, id string, responses map[string]json.RawMessage) (int, error)
	WaitFor(ctx context.Context, owner, id string, cond func(*taskstore.Task) bool) (*taskstore.Task, error)
	MarkSessionFallback(ctx context.Context, id string) (bool, error)
	GetSession(ctx context.Context, id string) (*taskstore.Session, error)
}

// Tools serves the fallback task tools for both fronts. nil: disabled.
type Tools struct {
	names   names
	tools   []json.RawMessage // the four Tool definitions, encoded once
	store   store
	metrics *obs.Metrics
	log     zerolog.Logger
}

func New(cfg Config, store store, m *obs.Metrics, log zerolog.Logger) (*Tools, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if _, err := ToolNames(prefix); err != nil {
		return nil, err
	}
	fb := &Tools{names: newNames(prefix), store: store, metrics: m, log: log}
	fb.tools = toolDefs(fb.names)
	return fb, nil
}

// toolDefs are the Tool definitions, written for the LLM agent
// that reads them.
func toolDefs(n names) []json.RawMessage {
	taskID := map[string]any{"type": "string",
		"description": "The taskId that a tool's answer gave when its work went on in the background."}
	schema := func(props map[string]any, required ...string) map[string]any {
		props["taskId"] = taskID
		return map[string]any{"type": "object", "properties": props,
			"required": append([]string{"taskId"}, required...), "additionalProperties": false}
	}
	defs := []map[string]any{{
		"name":  n.status,
		"title": "Background task status",
		"description": "Reports the state of a background task that another tool started. Use it when a tool's answer said " +
			"its work continues as a background task and gave a taskId. Returns the status (working, input_required, " +
			"completed, failed or cancelled), a status message, progress if the tool reports any, and, when the status is " +
			"input_required, the questions the task waits for (answer them with " + n.answer + "). Returns at once; to wait " +
			"for the result use " + n.result + ".",
		"inputSchema": schema(map[string]any{}),
		"annotations": map[string]any{"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
	}, {
		"name":  n.result,
		"title": "Wait for a background task's result",
		"description": "Waits for a background task that another tool started and, once it has finished, returns that " +
			"tool's own result. Waits at most waitSeconds (default 10, at most 50); if the task is still running then, " +
			"it returns the task's status instead, and you can call it again. If the task needs your input meanwhile, " +
			"you may be asked for it during the wait; otherwise the status lists the questions, which you answer with " +
			n.answer + ".",
		"inputSchema": schema(map[string]any{"waitSeconds": map[string]any{"type": "number", "minimum": 0,
			"maximum": fallbackWaitMax.Seconds(), "default": fallbackWaitDefault.Seconds(),
			"description": "How long to wait for the task to finish, in seconds."}}),
		"annotations": map[string]any{"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
	}, {
		"name":  n.cancel,
		"title": "Cancel a background task",
		"description": "Cancels a background task that another tool started, when its result is no longer wanted. " +
			"A task that has already finished cannot be cancelled.",
		"inputSchema": schema(map[string]any{}),
		"annotations": map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false},
	}, {
		"name":  n.answer,
		"title": "Answer a background task's questions",
		"description": "Answers the questions a background task waits for (its status is input_required; " + n.status +
			" lists them under inputRequests, each with a key, a method and its params). inputResponses maps each key " +
			"to its answer: for an elicitation/create question {\"action\": \"accept\", \"content\": {...}} with content " +
			"matching its requestedSchema, or {\"action\": \"decline\"}; for sampling/createMessage a message result " +
			"{\"role\": \"assistant\", \"content\": {\"type\": \"text\", \"text\": \"...\"}, \"model\": \"...\"}; for roots/list " +
			"{\"roots\": [{\"uri\": \"file:///...\"}]}. The task then goes on; follow it with " + n.result + ".",
		"inputSchema": schema(map[string]any{"inputResponses": map[string]any{"type": "object",
			"description":          "Maps each question's key to its answer.",
			"additionalProperties": map[string]any{"type": "object"}}}, "inputResponses"),
		"annotations": map[string]any{"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
	}}
	out := make([]json.RawMessage, len(defs))
	for i, d := range defs {
		out[i] = mcpwire.MustMarshal(d)
	}
	return out
}

// Is reports whether name is one of the fallback tools.
func (fb *Tools) Is(name string) bool {
	n := fb.names
	return name == n.status || name == n.result || name == n.cancel || name == n.answer
}

// args are a fallback tool's arguments.
type args struct {
	TaskID         string
	Wait           time.Duration
	InputResponses map[string]json.RawMessage
}

// ParseArgs reads the arguments of fallback tool name; a problem is a
// message for the agent, saying what to fix.
func (fb *Tools) ParseArgs(name string, raw json.RawMessage) (args, string) {
	a := args{Wait: fallbackWaitDefault}
	var m map[string]json.RawMessage
	if len(raw) > 0 && string(raw) != "null" {
		if !mcpwire.IsObject(raw) || json.Unmarshal(raw, &m) != nil {
			return a, "arguments must be an object such as {\"taskId\": \"...\"}"
		}
	}
	allowed := map[string]bool{"taskId": true}
	switch name {
	case fb.names.result:
		allowed["waitSeconds"] = true
	case fb.names.answer:
		allowed["inputResponses"] = true
	}
	for k := range m {
		if !allowed[k] {
			return a, fmt.Sprintf("unknown argument %q: %s takes %s", k, name, strings.Join(slices.Sorted(maps.Keys(allowed)), ", "))
		}
	}
	if !mcpwire.PlainString(m["taskId"], &a.TaskID) && json.Unmarshal(m["taskId"], &a.TaskID) != nil || a.TaskID == "" {
		return a, "taskId is required: the taskId string that the tool's answer gave"
	}
	if len(a.TaskID) > maxTaskIDLen {
		return a, fmt.Sprintf("task not found: %q is not a task id", a.TaskID[:32]+"…")
	}
	if w, ok := m["waitSeconds"]; ok && string(w) != "null" {
		var s float64
		if json.Unmarshal(w, &s) != nil || s < 0 || s > fallbackWaitMax.Seconds() {
			return a, fmt.Sprintf("waitSeconds must be a number from 0 to %g", fallbackWaitMax.Seconds())
		}
		a.Wait = time.Duration(s * float64(time.Second))
	}
	if name == fb.names.answer {
		raw := m["inputResponses"]
		if !mcpwire.IsObject(raw) || json.Unmarshal(raw, &a.InputResponses) != nil || len(a.InputResponses) == 0 {
			return a, "inputResponses is required: an object mapping each key of the task's inputRequests (see " +
				fb.names.status + ") to its answer"
		}
		for k, v := range a.InputResponses {
			if !mcpwire.IsObject(v) {
				return a, fmt.Sprintf("inputResponses[%q] must be an object, the answer to that question", k)
			}
		}
		if e := core.CheckInputResponses(len(a.InputResponses), name); e != nil {
			return a, e.Message
		}
	}
	return a, ""
}

// toolResult is a CallToolResult with one text content, structured
// content when given, and isError.
func toolResult(text string, structured any, isError bool) json.RawMessage {
	res := map[string]any{"content": []map[string]string{{"type": "text", "text": text}}}
	if structured != nil {
		res["structuredContent"] = structured
	}
	if isError {
		res["isError"] = true
	}
	return mcpwire.MustMarshal(res)
}

// notFound is the answer for an id that is no task of this owner: the same
// whether it never existed, expired, or belongs to someone else.
func notFound(id string) json.RawMessage {
	return toolResult(fmt.Sprintf("task not found: there is no task %q of yours (a task is kept until its ttl "+
		"runs out after it finished).", id), nil, true)
}

// StoreFailure maps a store error of a fallback tool: an unknown or
// expired task is a tool result ("task not found"), anything else the
// gateway's own failure (a JSON-RPC error).
func (fb *Tools) StoreFailure(err error, op, id string, era core.ClientEra) (json.RawMessage, *mcpwire.Error) {
	if errors.Is(err, taskstore.ErrNotFound) || errors.Is(err, taskstore.ErrExpired) {
		return notFound(id), nil
	}
	return nil, core.TaskError(fb.log, err, op, id, era)
}

// statusView is a task's state as the fallback tools show it
// (structuredContent).
type statusView struct {
	TaskID         string                            `json:"taskId"`
	Tool           string                            `json:"tool,omitempty"`
	Status         string                            `json:"status"`
	StatusMessage  string                            `json:"statusMessage,omitempty"`
	Progress       json.RawMessage                   `json:"progress,omitempty"`
	PollIntervalMs int64                             `json:"pollIntervalMs,omitempty"`
	CreatedAt      string                            `json:"createdAt,omitempty"`
	LastUpdatedAt  string                            `json:"lastUpdatedAt,omitempty"`
	InputRequests  map[string]taskstore.InputRequest `json:"inputRequests,omitempty"`
}

func statusOf(t *taskstore.Task) statusView {
	s := statusView{TaskID: t.ID, Tool: t.Tool, Status: string(t.Status), StatusMessage: t.StatusMessage,
		PollIntervalMs: t.PollInterval.Milliseconds(), CreatedAt: core.WireTime(t.CreatedAt), LastUpdatedAt: core.WireTime(t.LastUpdatedAt)}
	if len(t.Progress) > 0 && string(t.Progress) != "null" {
		s.Progress = t.Progress
	}
	if t.Status == taskstore.StatusInputRequired && len(t.InputRequests) > 0 {
		s.InputRequests = t.InputRequests
	}
	return s
}

// StatusResult renders t for task_status (and a task_result that timed
// out): the text an agent reads, and the same as structuredContent.
func (fb *Tools) StatusResult(t *taskstore.Task) json.RawMessage {
	var b strings.Builder
	fmt.Fprintf(&b, "Task %s (tool %s) is %s.", t.ID, t.Tool, strings.ReplaceAll(string(t.Status), "_", " "))
	if m := strings.TrimSuffix(t.StatusMessage, "."); m != "" {
		r, n := utf8.DecodeRuneInString(m)
		fmt.Fprintf(&b, " %c%s.", unicode.ToUpper(r), m[n:])
	}
	if p := progressText(t.Progress); p != "" {
		fmt.Fprintf(&b, " Progress: %s.", p)
	}
	switch {
	case t.Status.Terminal():
		fmt.Fprintf(&b, " Call %s with this taskId for the result.", fb.names.result)
	case t.Status == taskstore.StatusInputRequired && len(t.InputRequests) > 0:
		b.WriteString(" It waits for answers to these questions:")
		for _, key := range core.SortedInputKeys(t.InputRequests) {
			in := t.InputRequests[key]
			fmt.Fprintf(&b, "\n- key %q: %s %s", key, in.Method, string(in.Params))
		}
		fmt.Fprintf(&b, "\nAnswer them with %s (inputResponses maps each key to its answer).", fb.names.answer)
	default:
		fmt.Fprintf(&b, " Call %s with this taskId to wait for the result.", fb.names.result)
	}
	return toolResult(b.String(), statusOf(t), false)
}

// progressText is "3/10" or "3", with the message, from a progress
// notification's params.
func progressText(raw json.RawMessage) string {
	var p struct {
		Progress *float64 `json:"progress"`
		Total    *float64 `json:"total"`
		Message  string   `json:"message"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &p) != nil || p.Progress == nil {
		return ""
	}
	s := fmt.Sprintf("%g", *p.Progress)
	if p.Total != nil {
		s += fmt.Sprintf("/%g", *p.Total)
	}
	if p.Message != "" {
		s += " (" + p.Message + ")"
	}
	return s
}

// Outcome is what task_result returns for terminal t: the tool's own
// CallToolResult, else a tool error saying how it ended.
func Outcome(t *taskstore.Task) json.RawMessage {
	if len(t.Result) > 0 {
		return t.Result
	}
	if len(t.Error) > 0 {
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(t.Error, &e)
		return toolResult(fmt.Sprintf("The tool %s failed: %s (error %d).", t.Tool, e.Message, e.Code), nil, true)
	}
	if t.Status == taskstore.StatusCancelled {
		return toolResult(fmt.Sprintf("Task %s was cancelled before the tool %s produced a result.", t.ID, t.Tool), nil, true)
	}
	msg := t.StatusMessage
	if msg == "" {
		msg = "no result"
	}
	return toolResult(fmt.Sprintf("Task %s (tool %s) %s: %s", t.ID, t.Tool, t.Status, msg), nil, true)
}

// Started is the answer to the call that became task t: a plain
// CallToolResult that says where the result will come from. Its
// structuredContent is {taskId, status, pollIntervalMs}, unless the tool
// declares an outputSchema that such content would not match.
func (fb *Tools) Started(t *taskstore.Task, outputSchema, needsInput bool) json.RawMessage {
	text := fmt.Sprintf("The tool %s is still running, so its work continues in the background as task %s. "+
		"Call %s with {\"taskId\": %q} to wait for its result; %s reports its progress and %s stops it.",
		t.Tool, t.ID, fb.names.result, t.ID, fb.names.status, fb.names.cancel)
	if needsInput {
		text = fmt.Sprintf("The tool %s needs input before it can finish, so its work continues in the background as task %s. "+
			"Call %s with {\"taskId\": %q} to answer and wait for its result (or read the questions with %s and answer with %s).",
			t.Tool, t.ID, fb.names.result, t.ID, fb.names.status, fb.names.answer)
	}
	var structured any
	if !outputSchema {
		status := t.Status
		if needsInput {
			status = taskstore.StatusInputRequired
		}
		structured = map[string]any{"taskId": t.ID, "status": string(status), "pollIntervalMs": t.PollInterval.Milliseconds()}
	}
	return toolResult(text, structured, false)
}

// AwaitQuestion waits (briefly) until the worker has recorded the input
// request the call's upstream asked before it became task t, so that the
// answer saying the task needs input and a task_status right after it
// agree. Bounded: the answer goes out anyway.
func (fb *Tools) AwaitQuestion(ctx context.Context, t *taskstore.Task) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, _ = fb.store.WaitFor(ctx, t.Owner, t.ID, func(t *taskstore.Task) bool {
		return t.Status != taskstore.StatusWorking
	})
}

// status serves task_status.
func (fb *Tools) status(ctx context.Context, owner, id string, era core.ClientEra) (json.RawMessage, *mcpwire.Error) {
	t, err := fb.store.Get(ctx, owner, id)
	if err != nil {
		return fb.StoreFailure(err, "status", id, era)
	}
	fb.metrics.Tracer().LinkTask(ctx, t)
	return fb.StatusResult(t), nil
}

// cancel serves task_cancel.
func (fb *Tools) cancel(ctx context.Context, owner, id string, era core.ClientEra) (json.RawMessage, *mcpwire.Error) {
	t, err := fb.store.RequestCancel(ctx, owner, id, "The task was cancelled by request.")
	switch {
	case errors.Is(err, taskstore.ErrTerminal):
		if t, gerr := fb.store.Get(ctx, owner, id); gerr == nil {
			return toolResult(fmt.Sprintf("Task %s has already %s; there is nothing to cancel. Call %s for its result.",
				id, finishedVerb(t.Status), fb.names.result), statusOf(t), true), nil
		}
		return toolResult(fmt.Sprintf("Task %s has already finished; there is nothing to cancel.", id), nil, true), nil
	case err != nil:
		return fb.StoreFailure(err, "cancel", id, era)
	}
	fb.metrics.TaskFinished(t, taskstore.StatusCancelled, 0)
	fb.metrics.Tracer().LinkTask(ctx, t)
	fb.log.Info().Str("op", "cancelled").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", core.LogOwner(owner)).
		Float64("duration_seconds", time.Since(t.CreatedAt).Seconds()).Msg("task cancelled")
	return toolResult(fmt.Sprintf("Task %s (tool %s) is cancelled.", t.ID, t.Tool), statusOf(t), false), nil
}

func finishedVerb(s taskstore.Status) string {
	switch s {
	case taskstore.StatusCompleted:
		return "completed"
	case taskstore.StatusFailed:
		return "failed"
	}
	return "been cancelled"
}

// answer serves task_answer: the answers are recorded (owner-checked) and
// reach the worker wherever it runs. Keys the task does not wait for are
// named back, so the agent can fix them.
func (fb *Tools) answer(ctx context.Context, owner string, a args, era core.ClientEra) (json.RawMessage, *mcpwire.Error) {
	t, err := fb.store.Get(ctx, owner, a.TaskID)
	if err != nil {
		return fb.StoreFailure(err, "answer", a.TaskID, era)
	}
	fb.metrics.Tracer().LinkTask(ctx, t)
	if t.Status.Terminal() {
		return toolResult(fmt.Sprintf("Task %s has already %s and needs no answers. Call %s for its result.",
			t.ID, finishedVerb(t.Status), fb.names.result), statusOf(t), true), nil
	}
	var unknown []string
	answers := make(map[string]json.RawMessage, len(a.InputResponses))
	for k, v := range a.InputResponses {
		if _, ok := t.InputRequests[k]; !ok {
			unknown = append(unknown, k)
			continue
		}
		answers[k] = mcpwire.MustMarshal(core.InputAnswer{Result: v})
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		waits := core.SortedInputKeys(t.InputRequests)
		return toolResult(fmt.Sprintf("Task %s does not wait for an answer to %s; it waits for %s. Nothing was recorded.",
			t.ID, quoteList(unknown), quoteList(waits)), statusOf(t), true), nil
	}
	n, err := fb.store.AnswerInputs(ctx, owner, t.ID, answers)
	switch {
	case errors.Is(err, taskstore.ErrTerminal):
		return toolResult(fmt.Sprintf("Task %s finished meanwhile and needs no answers. Call %s for its result.",
			t.ID, fb.names.result), nil, true), nil
	case err != nil:
		return fb.StoreFailure(err, "answer", t.ID, era)
	}
	fb.log.Debug().Str("op", "answer").Str("task_id", t.ID).Int("accepted", n).Msg("input responses recorded")
	return toolResult(fmt.Sprintf("Recorded %d answer(s) for task %s; it goes on. Call %s with this taskId to wait for its result.",
		n, t.ID, fb.names.result), nil, false), nil
}

func quoteList(ks []string) string {
	if len(ks) == 0 {
		return "nothing"
	}
	q := make([]string, len(ks))
	for i, k := range ks {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}

// waitResult serves task_result without a stream: it waits up to a.Wait
// for the task to end (or to need input), then returns the tool's result,
// or the status.
func (fb *Tools) waitResult(ctx context.Context, owner string, a args, era core.ClientEra) (json.RawMessage, *mcpwire.Error) {
	t, err := fb.store.Get(ctx, owner, a.TaskID)
	if err != nil {
		return fb.StoreFailure(err, "result", a.TaskID, era)
	}
	if !t.Status.Terminal() && t.Status != taskstore.StatusInputRequired && a.Wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, a.Wait)
		next, err := fb.store.WaitFor(wctx, owner, a.TaskID, func(t *taskstore.Task) bool {
			return t.Status.Terminal() || t.Status == taskstore.StatusInputRequired
		})
		cancel()
		switch {
		case err == nil:
			t = next
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			if t2, err := fb.store.Get(ctx, owner, a.TaskID); err == nil {
				t = t2
			}
		default:
			return fb.StoreFailure(err, "result", a.TaskID, era)
		}
	}
	if t.Status.Terminal() {
		return Outcome(t), nil
	}
	return fb.StatusResult(t), nil
}

// Serve runs fallback tool name for owner; it returns the CallToolResult,
// or the gateway's own failure.
func (fb *Tools) Serve(ctx context.Context, owner, name string, a args, era core.ClientEra) (json.RawMessage, *mcpwire.Error) {
	switch name {
	case fb.names.status:
		return fb.status(ctx, owner, a.TaskID, era)
	case fb.names.cancel:
		return fb.cancel(ctx, owner, a.TaskID, era)
	case fb.names.answer:
		return fb.answer(ctx, owner, a, era)
	}
	return fb.waitResult(ctx, owner, a, era)
}

// AppendTools adds the fallback tools to a tools/list result, unless the
// upstream lists a tool of the same name (which is never hidden: the clash
// Is logged, and the gateway's tool left out).
func (fb *Tools) AppendTools(result json.RawMessage) (json.RawMessage, error) {
	var res map[string]json.RawMessage
	if err := json.Unmarshal(result, &res); err != nil || res == nil {
		return nil, errors.New("tools/list result is not an object")
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(res["tools"], &tools); err != nil {
		return nil, err
	}
	listed := make(map[string]bool, len(tools))
	for _, t := range tools {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &named) == nil {
			listed[named.Name] = true
		}
	}
	for i, name := range []string{fb.names.status, fb.names.result, fb.names.cancel, fb.names.answer} { // fb.tools' order
		def := fb.tools[i]
		if listed[name] {
			fb.log.Error().Str("op", "tools/list").Str("tool", name).
				Msg("the upstream lists a tool with a Tools tool's name; its tool is kept and the Tools tool left out: set --Tools-prefix")
			continue
		}
		tools = append(tools, def)
	}
	res["tools"] = mcpwire.MustMarshal(tools)
	return json.Marshal(res)
}

// FirstPage reports whether a tools/list request asks for the first page
// (no cursor): only that page gains the fallback tools.
func FirstPage(params json.RawMessage) bool {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	return len(params) == 0 || json.Unmarshal(params, &p) != nil || p.Cursor == nil
}

// BadArgs is the tool result for arguments the agent must fix.
func BadArgs(name, problem string) json.RawMessage {
	return toolResult(name+": "+problem, nil, true)
}

// ResultName is the name of the tool that waits for a task's result.
func (fb *Tools) ResultName() string { return fb.names.result }
