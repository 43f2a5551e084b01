package front2026

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// mrtrRound is an input_required result.
type mrtrRound struct {
	ResultType    string                     `json:"resultType"`
	TaskID        string                     `json:"taskId"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  string                     `json:"requestState"`
}

func decodeRound(t *testing.T, what string, r gwtest.Reply) mrtrRound {
	t.Helper()
	var rd mrtrRound
	if r.Error != nil || json.Unmarshal(r.Result, &rd) != nil || rd.ResultType != "input_required" || rd.TaskID != "" ||
		len(rd.InputRequests) == 0 || !strings.HasPrefix(rd.RequestState, mrtrPrefix) {
		t.Fatalf("%s: %+v %s, want an input_required round with the gateway's requestState and no task", what, r.Error, r.Result)
	}
	return rd
}

func answerAll(rd mrtrRound, name string) map[string]any {
	out := map[string]any{}
	for k := range rd.InputRequests {
		out[k] = map[string]any{"action": "accept", "content": map[string]any{"name": name, "confirm": true}}
	}
	return out
}

// mrtrCluster is two replicas in front of a session upstream with the
// conformance fixtures. Their questions come back as rounds within the
// long hybrid wait (gwtest.DirectWait); test_tool_with_task's retry becomes the
// task after its own wait (testupstream.ConformancePolicy), which its work
// after the answer outlasts.
func mrtrCluster(t *testing.T, hold time.Duration) (*frontrig.Fleet, *testupstream.Recorder) {
	t.Helper()
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Conformance: true, Recorder: rec}))
	t.Cleanup(up.Close)
	fl := newFleet(t, up.URL+"/mcp")
	for range 2 {
		fl.Add(func(c *frontrig.Config) {
			c.Policy = gwtest.HybridPolicy(gwtest.WithWait(gwtest.Rules(t, "test_tool_with_task", policy.Auto), testupstream.ConformanceComposeWait), gwtest.DirectWait)
			c.MRTRHold = hold
		})
	}
	return fl, rec
}

// TestMRTRBeforeTaskLegacy: a 2026-07-28 client, a session upstream that
// asks at once (within the hybrid wait): round 1 is input_required with no
// task (SEP-2663, "MRTR → tasks composition"); the retry, on the other
// replica, feeds the held call, which then works past the hybrid wait and
// becomes the task; a call that answers at once after the round is a
// plain result.
func TestMRTRBeforeTaskLegacy(t *testing.T) {
	fl, rec := mrtrCluster(t, 0)
	c := &gwtest.ModernClient{T: t, URLs: fl.URLs, Auth: "Bearer mrtr"}
	args := map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{}}
	rd := decodeRound(t, "round 1", c.Call("tools/call", args))
	if len(rd.InputRequests) != 1 || !strings.Contains(string(rd.InputRequests["1"]), "What is your name?") {
		t.Errorf("round 1 asks %v, want the name under key 1", rd.InputRequests)
	}
	retry := map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{},
		"inputResponses": answerAll(rd, "Alice"), "requestState": rd.RequestState}
	r := c.Call("tools/call", retry)
	var created gwtest.Detailed
	if r.Error != nil || json.Unmarshal(r.Result, &created) != nil || created.ResultType != "task" || created.TaskID == "" {
		t.Fatalf("round 2: %+v %s, want the CreateTaskResult", r.Error, r.Result)
	}
	if strings.Contains(string(r.Result), "requestState") || strings.Contains(string(r.Result), "inputRequests") {
		t.Errorf("the CreateTaskResult carries round fields: %s", r.Result)
	}
	done := c.WaitTask(created.TaskID, "completed")
	if text, _, _ := gwtest.ResultText(t, done.Result); !strings.Contains(text, "Alice") {
		t.Errorf("result %q", text)
	}
	if n := rec.Count("test_tool_with_task", testupstream.Called); n != 1 {
		t.Errorf("the upstream ran the tool %d times, want once (the held call)", n)
	}

	// The same requestState again: used already.
	if r := c.Call("tools/call", retry); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("a replayed requestState: %+v %s, want -32602", r.Error, r.Result)
	}

	// A round whose retry finishes within the wait is a plain result.
	rd = decodeRound(t, "elicit round", c.Call("tools/call", map[string]any{"name": "asks", "arguments": map[string]any{"n": 2}}))
	rd = decodeRound(t, "elicit round 2", c.Call("tools/call", map[string]any{"name": "asks", "arguments": map[string]any{"n": 2},
		"inputResponses": answerAll(rd, "x"), "requestState": rd.RequestState}))
	r = c.Call("tools/call", map[string]any{"name": "asks", "arguments": map[string]any{"n": 2},
		"inputResponses": answerAll(rd, "y"), "requestState": rd.RequestState})
	if text, _, _ := gwtest.ResultText(t, r.Result); text != "answered 2" || strings.Contains(string(r.Result), `"taskId"`) {
		t.Errorf("after two rounds: %+v %s, want the plain result", r.Error, r.Result)
	}
}

// TestMRTRBeforeTaskBadInput: a forged, foreign, mismatched or incomplete
// retry gets -32602 and reaches no held call; a round never retried is
// cancelled upstream after --mrtr-hold; an upstream that asks in more than
// 16 rounds fails the call.
func TestMRTRBeforeTaskBadInput(t *testing.T) {
	fl, rec := mrtrCluster(t, 500*time.Millisecond)
	c := &gwtest.ModernClient{T: t, URLs: fl.URLs, Auth: "Bearer owner"}
	args := func() map[string]any {
		return map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{}}
	}
	rd := decodeRound(t, "round 1", c.Call("tools/call", args()))
	with := func(state string, responses map[string]any) map[string]any {
		a := args()
		a["requestState"], a["inputResponses"] = state, responses
		return a
	}
	payload, sig, _ := strings.Cut(strings.TrimPrefix(rd.RequestState, mrtrPrefix), ".")
	flipped := []byte(sig)
	if flipped[0] == 'A' { // another valid base64url letter: the MAC must fail, not the decoding
		flipped[0] = 'B'
	} else {
		flipped[0] = 'A'
	}
	other := &gwtest.ModernClient{T: t, URLs: fl.URLs, Auth: "Bearer someone-else"}
	for name, tc := range map[string]struct {
		c      *gwtest.ModernClient
		params map[string]any
		want   string
	}{
		"forged signature": {c, with(mrtrPrefix+payload+"."+string(flipped), answerAll(rd, "x")), "requestState is invalid"},
		"garbage":          {c, with(mrtrPrefix+"xyz", answerAll(rd, "x")), "requestState is invalid"},
		"another owner":    {other, with(rd.RequestState, answerAll(rd, "x")), "requestState is invalid"},
		"another tool": {c, map[string]any{"name": "greet", "arguments": map[string]any{"name": "x"},
			"requestState": rd.RequestState, "inputResponses": answerAll(rd, "x")}, "requestState is invalid"},
		"missing answers": {c, with(rd.RequestState, map[string]any{}), "inputResponses lacks the answers to"},
		"other arguments": {c, map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{"x": 1},
			"requestState": rd.RequestState, "inputResponses": answerAll(rd, "x")}, "requestState is invalid"},
	} {
		r := tc.c.Call("tools/call", tc.params)
		if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, tc.want) {
			t.Errorf("%s: %+v %s, want -32602 %q", name, r.Error, r.Result, tc.want)
		}
	}
	// None of them reached the held call; nobody retries it: cancelled
	// upstream once the hold passes, and a late retry is refused.
	gwtest.WaitFor(t, func() bool { return rec.Count("test_tool_with_task", testupstream.Cancelled) == 1 })
	if r := c.Call("tools/call", with(rd.RequestState, answerAll(rd, "late"))); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("a retry after the hold: %+v %s, want -32602", r.Error, r.Result)
	}

	// An upstream that keeps asking: the 17th round fails the call.
	a := map[string]any{"name": "asks", "arguments": map[string]any{"n": 40}}
	rd = decodeRound(t, "asks round 1", c.Call("tools/call", a))
	var last gwtest.Reply
	rounds := 1
	for i := 0; i < maxMRTRRounds; i++ {
		last = c.Call("tools/call", map[string]any{"name": "asks", "arguments": map[string]any{"n": 40},
			"inputResponses": answerAll(rd, "x"), "requestState": rd.RequestState})
		if last.Error != nil {
			break
		}
		rd = decodeRound(t, "asks round", last)
		rounds++
	}
	if rounds != maxMRTRRounds || last.Error == nil || !strings.Contains(last.Error.Message, "more than 16 rounds") {
		t.Errorf("after %d rounds: %+v %s, want %d rounds, then the call failed", rounds, last.Error, last.Result, maxMRTRRounds)
	}
	gwtest.WaitFor(t, func() bool { return rec.Count("asks", testupstream.Cancelled) == 1 })
}

// TestMRTRConcurrentRetries: retries racing with one state: one wins, the
// others get -32602; an anonymous client's rounds work across replicas.
func TestMRTRConcurrentRetries(t *testing.T) {
	fl, _ := mrtrCluster(t, 0)
	c := &gwtest.ModernClient{T: t, URLs: fl.URLs, Auth: "Bearer race"}
	args := map[string]any{"name": "asks", "arguments": map[string]any{"n": 2}}
	rd := decodeRound(t, "round 1", c.Call("tools/call", args))
	const n = 4
	results := make(chan gwtest.Reply, n)
	for i := 0; i < n; i++ {
		retry := map[string]any{"name": "asks", "arguments": map[string]any{"n": 2},
			"inputResponses": answerAll(rd, "x"), "requestState": rd.RequestState} // call adds _meta: one each
		go func() {
			cl := &gwtest.ModernClient{T: t, URLs: fl.URLs[i%2 : i%2+1], Auth: "Bearer race"}
			results <- cl.Call("tools/call", retry)
		}()
	}
	wins := 0
	for i := 0; i < n; i++ {
		r := <-results
		switch {
		case r.Error == nil:
			wins++
		case r.Error.Code != -32602:
			t.Errorf("a losing retry: %+v, want -32602", r.Error)
		}
	}
	if wins != 1 {
		t.Errorf("%d retries with one state went on, want 1", wins)
	}

	anon := &gwtest.ModernClient{T: t, URLs: fl.URLs}
	rd = decodeRound(t, "anonymous round 1", anon.Call("tools/call", args))
	rd = decodeRound(t, "anonymous round 2", anon.Call("tools/call", map[string]any{"name": "asks", "arguments": map[string]any{"n": 2},
		"inputResponses": answerAll(rd, "a"), "requestState": rd.RequestState}))
	r := anon.Call("tools/call", map[string]any{"name": "asks", "arguments": map[string]any{"n": 2},
		"inputResponses": answerAll(rd, "b"), "requestState": rd.RequestState})
	if text, _, _ := gwtest.ResultText(t, r.Result); text != "answered 2" {
		t.Errorf("anonymous: %+v %s", r.Error, r.Result)
	}
}
