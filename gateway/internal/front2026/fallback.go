package front2026

// The fallback task tools (internal/fallback) for 2026-07-28 clients without
// the tasks extension. Such a client has no session, so the tools are in
// every tools/list first page it gets while they are on (there is no
// stream to announce them on). A task candidate runs as a hybrid call
// (call.go) whose task, when it becomes one, is answered with the
// result naming it. The owner is the usual one (core.Owner2026): the
// Authorization, else the task itself (its id is the credential). Input:
// task_status shows the task's inputRequests and task_answer answers them;
// task_result waits without a stream.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/fallback"
	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// fallbackClient reports whether mr's client may use the fallback tools.
func (f *Front) fallbackClient(mr *statelessReq) bool { return f.Fallback != nil && !mr.Tasks }

// fallbackTool serves one of the fallback tools, and reports whether name
// was one (an upstream tool of the same name is never hidden).
func (f *Front) fallbackTool(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, mr *statelessReq, p *core.CallParams) bool {
	if !f.fallbackClient(mr) || !f.Fallback.Is(p.Name) {
		return false
	}
	if _, listed := f.Decider.ToolInfo(r.Context(), p.Name); listed {
		return false
	}
	a, problem := f.Fallback.ParseArgs(p.Name, p.Arguments)
	if problem != "" {
		mcpwire.WriteResult(w, msg.ID, core.StatelessResult("tools/call", fallback.BadArgs(p.Name, problem)))
		return true
	}
	res, e := f.Fallback.Serve(r.Context(), core.Owner2026(r, a.TaskID), p.Name, a, core.Era2026)
	if e != nil {
		mcpwire.WriteError(w, msg.ID, e)
		return true
	}
	mcpwire.WriteResult(w, msg.ID, core.StatelessResult("tools/call", res))
	return true
}

// toolsList answers tools/list: the upstream's, with the fallback tools
// on the first page for a client that may use them.
func (f *Front) toolsList(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, mr *statelessReq) {
	if !f.fallbackClient(mr) || !fallback.FirstPage(msg.Params) {
		f.forward(w, r, msg, mr, "")
		return
	}
	cw := &captureWriter{header: http.Header{}}
	f.forward(cw, r, msg, mr, "")
	resp := cw.response()
	if !upstreamside.Rewritable(resp) {
		cw.replay(w)
		return
	}
	a, err := upstreamside.ReadAnswer(resp, msg.ID)
	if err != nil {
		cw.replay(w)
		return
	}
	defer a.Close()
	if a.Result == nil {
		a.Write(w, r, f.Log, nil)
		return
	}
	result, err := f.Fallback.AppendTools(a.Result)
	if err != nil {
		f.Log.Warn().Str("op", "tools/list").Err(err).Msg("cannot add the fallback.Tools tools to the upstream's tools/list result")
		a.Write(w, r, f.Log, nil)
		return
	}
	out, err := mcpwire.WithMember(a.Msg, "result", result)
	if err != nil {
		out = nil
	}
	a.Write(w, r, f.Log, out)
}

// captureWriter keeps a whole answer (a tools/list page) to rewrite it.
type captureWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) Flush()              {}

func (c *captureWriter) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *captureWriter) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.body.Write(b)
}

// response is what was captured, as an upstream answer to read.
func (c *captureWriter) response() *http.Response {
	c.WriteHeader(http.StatusOK)
	return &http.Response{StatusCode: c.status, Header: c.header, Body: io.NopCloser(bytes.NewReader(c.body.Bytes()))}
}

// replay writes what was captured, unchanged.
func (c *captureWriter) replay(w http.ResponseWriter) {
	for k, v := range c.header {
		w.Header()[k] = v
	}
	c.WriteHeader(http.StatusOK)
	w.WriteHeader(c.status)
	_, _ = w.Write(c.body.Bytes())
}

// fallbackStarted is the answer to a hybrid call of a fallback client
// that became task j.task.
func (f *Front) fallbackStarted(r *http.Request, j *runner.Job, tool string) json.RawMessage {
	decl, _ := f.Decider.ToolInfo(r.Context(), tool)
	if j.First != nil {
		f.Fallback.AwaitQuestion(r.Context(), j.Task)
	}
	return core.StatelessResult("tools/call", f.Fallback.Started(j.Task, decl.Output, j.First != nil))
}

// withAskableClient returns the params of a stateless request whose
// _meta client capabilities declare elicitation and sampling, so that a
// stateless upstream asks for the input a fallback task's client answers
// with task_answer.
func withAskableClient(params json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return params
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &meta) != nil || meta == nil {
		return params
	}
	caps, ok := core.WithInputCaps(meta[core.MetaClientCaps])
	if !ok {
		return params
	}
	meta[core.MetaClientCaps] = caps
	p["_meta"] = mcpwire.MustMarshal(meta)
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// canAnswer reports whether a client with capabilities caps can answer
// every input request of an MRTR input_required result itself.
func canAnswer(caps, result json.RawMessage) bool {
	var ir struct {
		InputRequests map[string]struct {
			Method string `json:"method"`
		} `json:"inputRequests"`
	}
	if json.Unmarshal(result, &ir) != nil {
		return false
	}
	for _, in := range ir.InputRequests {
		if len(caps) == 0 || !runner.ClientCan(caps, in.Method) {
			return false
		}
	}
	return true
}
