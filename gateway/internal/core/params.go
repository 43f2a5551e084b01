package core

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// CallParams are a tools/call's params, decoded once where the call
// arrives and carried in that form through the front's decisions (which
// tool, a task asked for, an MRTR retry or a bridged call's answers), so
// that what reads them never decodes the params again. raw keeps the
// params as the client sent them: what goes upstream is made from it.
type CallParams struct {
	Name      string
	Arguments json.RawMessage
	// Task is the 2025-11-25 task augmentation (MCP 2025-11-25, Tasks,
	// "Creating Tasks"); nil when absent or null.
	Task *TaskParam
	// requestState and inputResponses are an MRTR retry's (SEP-2322):
	// the requestState the gateway minted and the client's answers. A
	// requestState that is not a string, or answers that are not an
	// object, are none (the call is a new one).
	requestState   string
	inputResponses map[string]json.RawMessage
	raw            json.RawMessage
	hasTask        bool // params has a task member, null or not
}

// errCallParams says why a tools/call's params cannot be read.
var errCallParams = errors.New("tools/call params must be an object with a tool name")

// DecodeCall decodes a tools/call's params. It returns an error when they
// are not an object, name is not a string, or task not an object; p holds
// what could be read even then (Name for an older client's call, which
// passes through whatever its params say).
func DecodeCall(raw json.RawMessage) (p *CallParams, err error) {
	var m struct {
		Name           json.RawMessage `json:"name"`
		Arguments      json.RawMessage `json:"arguments"`
		Task           json.RawMessage `json:"task"`
		RequestState   json.RawMessage `json:"requestState"`
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	p = &CallParams{raw: raw}
	if json.Unmarshal(raw, &m) != nil || len(raw) == 0 || raw[0] != '{' {
		return p, errCallParams
	}
	p.Arguments, p.hasTask = m.Arguments, len(m.Task) > 0
	if len(m.Name) > 0 && json.Unmarshal(m.Name, &p.Name) != nil {
		err = errCallParams
	}
	if p.hasTask && json.Unmarshal(m.Task, &p.Task) != nil {
		p.Task, err = nil, errCallParams
	}
	if len(m.RequestState) > 0 && json.Unmarshal(m.RequestState, &p.requestState) != nil {
		p.requestState = ""
	}
	if p.requestState != "" && len(m.InputResponses) > 0 && json.Unmarshal(m.InputResponses, &p.inputResponses) != nil {
		p.requestState, p.inputResponses = "", nil // not a retry the gateway can read
	}
	return p, err
}

// Retry returns the requestState and answers of an MRTR retry whose
// requestState starts with prefix (the gateway's own: signed rounds, or
// bridged calls), and whether it is one.
func (p *CallParams) Retry(prefix string) (state string, responses map[string]json.RawMessage, ok bool) {
	if !strings.HasPrefix(p.requestState, prefix) {
		return "", nil, false
	}
	return p.requestState, p.inputResponses, true
}

// WithoutTask is the params without their task member (the gateway's,
// never the upstream's): Raw itself when there is none.
func (p *CallParams) WithoutTask() (json.RawMessage, error) {
	if !p.hasTask {
		return p.raw, nil
	}
	return mcpwire.WithoutMember(p.raw, "task")
}
