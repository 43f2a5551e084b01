package policy

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// exampleYAML is exampleFile in YAML, each rule on the same line.
const exampleYAML = `
rules:
  - {tool: "deploy_*", mode: task-required, ttl: 2h, pollInterval: 10s}
  - {tool: "*", annotations: {readOnlyHint: true}, mode: sync}
  - tool: "github/*"
    annotations: {openWorldHint: true, destructiveHint: true}
    mode: task
  - {tool: "report_*", mode: task, hybridWait: 500ms}
  - {tool: search, mode: auto, hybridWait: 3s}
`

// TestYAMLRulesEqualJSON: the same rules in YAML read as in JSON, each
// rule's Source naming its line in the YAML file; the name or the
// content says which format a file is.
func TestYAMLRulesEqualJSON(t *testing.T) {
	fromJSON, err := ParseRulesFile("rules.json", []byte(exampleFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rules.yaml", "rules.yml", "rules"} {
		fromYAML, err := ParseRulesFile(name, []byte(exampleYAML))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(fromYAML) != len(fromJSON) {
			t.Fatalf("%s: %d rules, want %d", name, len(fromYAML), len(fromJSON))
		}
		for i := range fromJSON {
			want, got := fromJSON[i], fromYAML[i]
			want.Source, got.Source = "", ""
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s rule %d: got %+v, want %+v", name, i+1, got, want)
			}
		}
		if wantLines := []string{":3", ":4", ":5", ":8", ":9"}; !strings.HasSuffix(fromYAML[2].Source, wantLines[2]) || !strings.HasSuffix(fromYAML[4].Source, wantLines[4]) {
			t.Errorf("%s: sources %q, %q; want the YAML lines 5 and 9", name, fromYAML[2].Source, fromYAML[4].Source)
		}
	}
	// JSON without a .json name is still JSON.
	if _, err := ParseRulesFile("rules", []byte(exampleFile)); err != nil {
		t.Fatalf("JSON named rules: %v", err)
	}
}

// TestYAMLRulesErrors: a YAML file's errors name its own lines and say
// what is wrong; what JSON cannot say (aliases, hex numbers) is refused.
func TestYAMLRulesErrors(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"r.yaml", "rules:\n  - {tool: a, mode: task}\n  - {tool: b, mode: sometimes}\n", `r.yaml: rule 2 (line 3): `},
		{"r.yaml", "rules:\n  - tool: a\n    mode: task\n    tll: 1h\n", `rule 1 (line 4): unknown field "tll"`},
		{"r.yaml", "rules:\n  - {tool: a\n", "r.yaml:"},
		{"r.yaml", "base: &b {tool: a, mode: task}\nrules: [*b]\n", "aliases are not allowed"},
		{"r.yaml", "rules:\n  - {tool: a, mode: task, ttl: 0x10}\n", "in decimal"},
		{"r.yaml", "", "the file is empty"},
		{"r.json", "rules:\n  - {tool: a, mode: task}\n", "r.json:1:1: invalid character 'r' looking for beginning of value: a rules file is JSON ({\"rules\": [...]}), or YAML named .yaml or .yml"},
	} {
		_, err := ParseRulesFile(tc.name, []byte(tc.data))
		var fe *FileError
		if err == nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: %v (%T), want a *FileError with %q", tc.name, tc.data, err, err, tc.want)
		}
	}
}

// FuzzYAMLRulesFile: the YAML reader never panics, and its errors are
// *FileErrors with a line inside the input.
func FuzzYAMLRulesFile(f *testing.F) {
	f.Add([]byte(exampleYAML))
	f.Add([]byte("rules:\n  - {tool: a, mode: task}\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("rules: [{tool: '[', mode: sync, ttl: .inf}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := ParseRulesFile("f.yaml", data)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FileError", err, err)
			}
			// YAML breaks lines at \n, \r and \r\n: this bounds its count.
			if lines := 1 + bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")); fe.Line < 1 || fe.Line > lines+1 || fe.Msg == "" {
				t.Fatalf("error %q: line %d outside the input (%d lines)", err, fe.Line, lines)
			}
			return
		}
		for i, r := range rules {
			if r.Mode < Task || r.Mode > Auto || checkGlob(r.Glob) != nil || r.TTL < 0 {
				t.Fatalf("rule %d is not valid: %+v", i+1, r)
			}
		}
	})
}
