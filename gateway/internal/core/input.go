package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// Input requests reach a 2025-11-25 client as server→client requests on its
// tasks/result stream, with a request id the gateway mints:
//
//	"taskgate-input:<taskId>:<key>"
//
// The client answers with a POSTed JSON-RPC response carrying that id, to
// any replica. The id names the task and the input key, so the answer is
// recorded in the store (owner-checked) and reaches the worker, wherever it
// runs, as an "inputs" event (docs/ARCHITECTURE.md invariant 6).
const inputIDPrefix = "taskgate-input:"

func InputID(taskID, key string) json.RawMessage {
	b, _ := json.Marshal(inputIDPrefix + taskID + ":" + key)
	return b
}

// IsInputID reports whether a response id is one the gateway minted.
func IsInputID(id json.RawMessage) bool {
	return len(id) > len(inputIDPrefix)+1 && id[0] == '"' && strings.HasPrefix(string(id[1:]), inputIDPrefix)
}

func ParseInputID(id json.RawMessage) (taskID, key string, ok bool) {
	var s string
	if json.Unmarshal(id, &s) != nil {
		return "", "", false
	}
	rest, found := strings.CutPrefix(s, inputIDPrefix)
	if !found {
		return "", "", false
	}
	taskID, key, ok = strings.Cut(rest, ":")
	return taskID, key, ok && taskID != "" && key != ""
}

// InputAnswer is what is stored for an input request: the client's
// JSON-RPC result or error, which the worker hands back upstream.
type InputAnswer struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// MaxInputRequests bounds the input requests a task has outstanding at
// once, and so the answers one tasks/update or MRTR retry may carry:
// without it one request could make Redis run a script over any number of
// keys, for every replica. MaxInputKeyLen bounds a key: the gateway mints
// decimal counters.
const (
	MaxInputRequests = 64
	MaxInputKeyLen   = 20
)

// CheckInputResponses refuses a method carrying more answers than any
// task can have outstanding.
func CheckInputResponses(n int, method string) *mcpwire.Error {
	if n <= MaxInputRequests {
		return nil
	}
	return mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, fmt.Sprintf(
		"%s carries %d inputResponses; a task has at most %d input requests outstanding", method, n, MaxInputRequests))
}

func SortedInputKeys(m map[string]taskstore.InputRequest) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// IsInputRequired reports whether resp is an MRTR input_required result.
func IsInputRequired(resp *jsonrpc.Response) bool {
	if resp == nil || resp.Error != nil || !bytes.Contains(resp.Result, []byte(`"input_required"`)) {
		return false
	}
	var r struct {
		ResultType string `json:"resultType"`
	}
	return json.Unmarshal(resp.Result, &r) == nil && r.ResultType == "input_required"
}

// WithInputCaps returns client capabilities caps with elicitation (form)
// and sampling declared, and whether it added either.
func WithInputCaps(caps json.RawMessage) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if len(caps) == 0 || string(caps) == "null" {
		m = map[string]json.RawMessage{}
	} else if json.Unmarshal(caps, &m) != nil || m == nil {
		return caps, false
	}
	added := false
	if _, ok := m["elicitation"]; !ok {
		m["elicitation"] = json.RawMessage(`{"form":{}}`)
		added = true
	}
	if _, ok := m["sampling"]; !ok {
		m["sampling"] = json.RawMessage(`{}`)
		added = true
	}
	if !added {
		return caps, false
	}
	out, err := json.Marshal(m)
	if err != nil {
		return caps, false
	}
	return out, true
}
