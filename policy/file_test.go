package policy

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The example in doc.go and docs/policy.md.
const exampleFile = `{
  "rules": [
    {"tool": "deploy_*", "mode": "task-required", "ttl": "2h", "pollInterval": "10s"},
    {"tool": "*", "annotations": {"readOnlyHint": true}, "mode": "sync"},
    {"tool": "github/*", "annotations": {"openWorldHint": true, "destructiveHint": true}, "mode": "task"},
    {"tool": "report_*", "mode": "task", "hybridWait": "500ms"},
    {"tool": "search", "mode": "auto", "hybridWait": "3s"}
  ]
}
`

func TestParseFileExample(t *testing.T) {
	got, err := ParseFile("rules.json", []byte(exampleFile))
	if err != nil {
		t.Fatal(err)
	}
	want := Rules{
		{Glob: "deploy_*", Mode: TaskRequired, TTL: 2 * time.Hour, PollInterval: 10 * time.Second, Source: "rules.json:3"},
		{Glob: "*", Mode: Sync, When: Annotations{ReadOnlyHint: ptr(true)}, Source: "rules.json:4"},
		{Glob: "github/*", Mode: Task, When: Annotations{OpenWorldHint: ptr(true), DestructiveHint: ptr(true)}, Source: "rules.json:5"},
		{Glob: "report_*", Mode: Task, HybridWait: 500 * time.Millisecond, Source: "rules.json:6"},
		{Glob: "search", Mode: Auto, HybridWait: 3 * time.Second, Source: "rules.json:7"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	// The documented example is this one.
	for _, doc := range []string{"doc.go", "../docs/policy.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(normalise(b), normalise([]byte(exampleFile))) {
			t.Errorf("%s does not hold the example rules file", doc)
		}
	}
}

// normalise drops Go comment markers and indentation, so the example
// can be found in doc.go as in docs/policy.md.
func normalise(b []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), "//")
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

func TestParseFileEmptyAndDefaults(t *testing.T) {
	rs, err := ParseFile("r.json", []byte(`{"rules": []}`))
	if err != nil || len(rs) != 0 {
		t.Errorf("empty list: %v %v", rs, err)
	}
	rs, err = ParseFile("r.json", []byte(`{"rules":[{"mode":"sync"}]}`))
	if err != nil || len(rs) != 1 || rs[0].Glob != "*" || rs[0].Source != "r.json:1" {
		t.Errorf("tool defaults to *: %+v %v", rs, err)
	}
}

func TestParseFileErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", ``, `r.json:1:1: empty file`},
		{"blank", "\n\n  ", `r.json:3:3: empty file`},
		{"syntax", "{\n  \"rules\": [\n    {\"tool\": \"a\",}\n  ]\n}", `r.json:3:18: invalid character '}'`},
		{"truncated", "{\"rules\": [\n", `r.json:2:1: unexpected end of file`},
		{"trailing", "{\"rules\": []}\n{}", `r.json:2:1: unexpected data after the top-level object`},
		{"not an object", "\n[]", `r.json:2:1: the file must be a JSON object`},
		{"no rules", "{}", `r.json:1:1: missing "rules"`},
		{"unknown top field", "{\"rules\": [],\n \"Rules\": []}", `r.json:2:2: unknown field "Rules" (did you mean "rules"?)`},
		{"duplicate rules", "{\"rules\": [],\n\"rules\": []}", `r.json:2:1: duplicate field "rules"`},
		{"rules not a list", "{\"rules\": {}}", `r.json:1:11: "rules" must be a list`},
		{"rule not an object", "{\"rules\": [\n\"x\"]}", `r.json: rule 1 (line 2): a rule must be an object`},
		{"missing mode", "{\"rules\": [\n{\"tool\": \"a\", \"mode\": \"sync\"},\n{\"tool\": \"b\"}]}", `r.json: rule 2 (line 3): missing "mode"`},
		{"bad mode", "{\"rules\": [\n{\"tool\": \"a\",\n \"mode\": \"tsk\"}]}", `r.json: rule 1 (line 3): unknown mode "tsk": want task, task-required, sync or auto`},
		{"mode not a string", `{"rules": [{"mode": 1}]}`, `rule 1 (line 1): "mode" must be a string`},
		{"bad glob", "{\"rules\": [\n\n{\"tool\": \"[a-\", \"mode\": \"task\"}]}", `r.json: rule 1 (line 3): bad tool glob "[a-"`},
		{"empty glob", `{"rules": [{"tool": "", "mode": "task"}]}`, `rule 1 (line 1): empty tool glob`},
		{"unknown field", "{\"rules\": [{\"mode\": \"task\",\n \"poll_interval\": \"1s\"}]}", `r.json: rule 1 (line 2): unknown field "poll_interval" (did you mean "pollInterval"?)`},
		{"duplicate field", "{\"rules\": [{\"mode\": \"task\",\n\"mode\": \"sync\"}]}", `rule 1 (line 2): duplicate field "mode"`},
		{"bad duration", "{\"rules\": [{\"mode\": \"task\",\n\"ttl\": \"2 hours\"}]}", `rule 1 (line 2): "ttl": "2 hours" is not a positive duration`},
		{"zero duration", `{"rules": [{"mode": "task", "pollInterval": "0s"}]}`, `"pollInterval": "0s" is not a positive duration`},
		{"number duration", `{"rules": [{"mode": "task", "ttl": 3600}]}`, `"ttl" must be a duration string`},
		{"sync with ttl", "{\"rules\": [{\"mode\": \"sync\",\n\"ttl\": \"1h\"}]}", `rule 1 (line 2): a sync rule creates no task`},
		{"hybridWait on task-required", "{\"rules\": [{\"mode\": \"task-required\",\n\n\"hybridWait\": \"1s\"}]}", `rule 1 (line 3): hybridWait applies only to task and auto rules, not task-required`},
		{"annotations not an object", `{"rules": [{"mode": "sync", "annotations": true}]}`, `"annotations" must be an object`},
		{"unknown annotation", "{\"rules\": [{\"mode\": \"sync\", \"annotations\": {\n\"readonlyhint\": true}}]}", `rule 1 (line 2): unknown annotation "readonlyhint" (did you mean "readOnlyHint"?)`},
		{"annotation not bool", "{\"rules\": [{\"mode\": \"sync\", \"annotations\": {\n\"readOnlyHint\": \"yes\"}}]}", `rule 1 (line 2): annotation "readOnlyHint" must be true or false`},
		{"duplicate annotation", `{"rules": [{"mode": "sync", "annotations": {"readOnlyHint": true, "readOnlyHint": false}}]}`, `duplicate annotation "readOnlyHint"`},
		{"field after rules", "{\"rules\": [{\"mode\": \"sync\"}],\n\"x\": 1}", `r.json:2:1: unknown field "x"`},
	}
	for _, tt := range tests {
		_, err := ParseFile("r.json", []byte(tt.in))
		var fe *FileError
		if !errors.As(err, &fe) {
			t.Errorf("%s: error %v, want a *FileError", tt.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

// FuzzRulesFile: the parser never panics; an error always is a *FileError
// with a line and column inside the input; a file that parses holds rules
// Decide can use.
func FuzzRulesFile(f *testing.F) {
	f.Add([]byte(exampleFile))
	f.Add([]byte(`{"rules": [{"mode": "task"}]}`))
	f.Add([]byte(`{"rules": [{"tool": "a*", "mode": "auto", "annotations": {"readOnlyHint": false}, "hybridWait": "1s"}]}`))
	f.Add([]byte("{\"rules\": [\n{\"tool\": \"[\", \"mode\": \"sync\"}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := ParseFile("f.json", data)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FileError", err, err)
			}
			lines := 1 + bytes.Count(data, []byte("\n"))
			if fe.Line < 1 || fe.Line > lines || fe.Column < 1 || fe.Msg == "" {
				t.Fatalf("error %q: line %d column %d outside the input (%d lines)", err, fe.Line, fe.Column, lines)
			}
			if !strings.Contains(err.Error(), "line") && !strings.HasPrefix(err.Error(), "f.json:") {
				t.Fatalf("error %q has no position", err)
			}
			return
		}
		for i, r := range rules {
			if r.Mode < Task || r.Mode > Auto || checkGlob(r.Glob) != nil || r.TTL < 0 || r.PollInterval < 0 || r.HybridWait < 0 {
				t.Fatalf("rule %d is not valid: %+v", i+1, r)
			}
		}
		Decide(&Config{Rules: rules}, Tool{Name: "a/b"}, Client2026, "", Stats{Count: 1, P50: time.Second, P95: 3 * time.Second})
	})
}
