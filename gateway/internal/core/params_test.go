package core

import (
	"encoding/json"
	"testing"
)

// TestDecodeCall: a tools/call's params read once: the tool, the task
// asked for, an MRTR retry; what is not readable says so, and params with
// no task member go upstream as the client sent them.
func TestDecodeCall(t *testing.T) {
	for _, c := range []struct {
		params, name, state string
		task, bad, same     bool
	}{
		{params: `{"name":"echo","arguments":{"text":"x"}}`, name: "echo", same: true},
		{params: `{"name":"echo","task":{"ttl":5000}}`, name: "echo", task: true},
		{params: `{"name":"echo","task":null}`, name: "echo"},
		{params: `{"name":"echo","task":5}`, name: "echo", bad: true},
		{params: `{"name":5}`, bad: true},
		{params: `[1]`, bad: true},
		{params: ``, bad: true},
		{params: `{"name":"echo","requestState":"s1","inputResponses":{"k":{}}}`, name: "echo", state: "s1", same: true},
		{params: `{"name":"echo","requestState":"s1","inputResponses":[1]}`, name: "echo", same: true},
		{params: `{"name":"echo","requestState":7}`, name: "echo", same: true},
	} {
		p, err := DecodeCall(json.RawMessage(c.params))
		if (err != nil) != c.bad || p.Name != c.name || (p.Task != nil) != c.task || p.requestState != c.state {
			t.Errorf("%s: name %q task %v state %q err %v; want %q %v %q bad %v", c.params, p.Name, p.Task != nil, p.requestState, err, c.name, c.task, c.state, c.bad)
			continue
		}
		if c.bad {
			continue
		}
		out, err := p.WithoutTask()
		var m map[string]json.RawMessage
		if err != nil || json.Unmarshal(out, &m) != nil {
			t.Errorf("%s: without task %s, %v", c.params, out, err)
			continue
		}
		if _, ok := m["task"]; ok || (string(out) == c.params) != c.same {
			t.Errorf("%s: without task = %s (unchanged: want %v)", c.params, out, c.same)
		}
	}
	p, _ := DecodeCall(json.RawMessage(`{"name":"t","requestState":"pre:x","inputResponses":{"a":1}}`))
	if st, resp, ok := p.Retry("pre:"); !ok || st != "pre:x" || string(resp["a"]) != "1" {
		t.Errorf("Retry(pre:) = %q %v %v", st, resp, ok)
	}
	if _, _, ok := p.Retry("other:"); ok {
		t.Error("Retry took another prefix's state")
	}
}

// FuzzDecodeCall: any params decode without a panic, and what is sent
// upstream never carries the task member.
func FuzzDecodeCall(f *testing.F) {
	for _, s := range []string{`{"name":"a","task":{"ttl":1}}`, `{"name":"a","requestState":"x","inputResponses":{}}`, `null`, `{"task":null}`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := DecodeCall(raw)
		if p == nil {
			t.Fatal("nil params")
		}
		if err != nil {
			return
		}
		out, err := p.WithoutTask()
		if err != nil {
			t.Fatalf("%s: decoded, but without task: %v", raw, err)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(out, &m) != nil {
			t.Fatalf("%s: without task is not an object: %s", raw, out)
		}
		if _, ok := m["task"]; ok {
			t.Fatalf("%s: the task member went upstream: %s", raw, out)
		}
	})
}
