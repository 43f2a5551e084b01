package mcpwire_test

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"testing"

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

// task2026 stands for a task of the tasks extension (the gateway's
// core.Task2026, which this package may not import): a struct whose result
// is raw JSON.
type task2026 struct {
	TaskID string          `json:"taskId"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
}

func TestFastpathWriteMarshalled(t *testing.T) {
	results := []any{
		map[string]string{"resultType": "complete"},
		task2026{TaskID: "x<y>&z", Status: "completed", Result: json.RawMessage(`{"content":[{"type":"text","text":"a <b> & \u2028"}], "resultType" : "complete"}`)},
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
