package policy

import (
	"strings"
	"testing"
)

func TestRerunnable(t *testing.T) {
	yes, no := true, false
	file, err := ParseFile("rules.json", []byte(`{"rules": [
  {"tool": "report_*", "rerun": true},
  {"tool": "deploy", "mode": "task", "rerun": false},
  {"tool": "*", "annotations": {"destructiveHint": true}, "rerun": false}
]}`))
	if err != nil {
		t.Fatal(err)
	}
	flag, err := NewRerunRule("ro_but_not", false)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Rules: append(Rules{flag}, file...)}
	for _, tc := range []struct {
		tool Tool
		want bool
		why  string
	}{
		{Tool{Name: "plain"}, false, "rules.json:4"}, // destructive by the spec's default
		{Tool{Name: "gentle", Annotations: Annotations{DestructiveHint: &no}}, false, "neither"},
		{Tool{Name: "lookup", Annotations: Annotations{ReadOnlyHint: &yes}}, true, "readOnlyHint"},
		{Tool{Name: "put", Annotations: Annotations{IdempotentHint: &yes, DestructiveHint: &no}}, true, "idempotentHint"},
		// The rule beats the hint, both ways.
		{Tool{Name: "ro_but_not", Annotations: Annotations{ReadOnlyHint: &yes}}, false, "--no-rerun"},
		{Tool{Name: "report_q3"}, true, "rules.json:2"},
		{Tool{Name: "deploy", Annotations: Annotations{IdempotentHint: &yes, DestructiveHint: &no}}, false, "rules.json:3"},
		// An idempotent tool that is destructive (the spec's default) is
		// caught by the annotation rule.
		{Tool{Name: "wipe", Annotations: Annotations{IdempotentHint: &yes}}, false, "rules.json:4"},
	} {
		got, why := Rerunnable(cfg, tc.tool)
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %v %q, want %v and a reason naming %q", tc.tool.Name, got, why, tc.want, tc.why)
		}
	}
	// A rerun-only rule decides no mode: "report_q3" still follows latency.
	if _, _, ok := cfg.Rules.MatchTool(Tool{Name: "report_q3"}); ok {
		t.Error("a rerun-only rule matched as a mode rule")
	}
	if r, _, ok := cfg.Rules.MatchTool(Tool{Name: "deploy"}); !ok || r.Mode != Task {
		t.Errorf("the deploy rule's mode: %v %v", r, ok)
	}
	if got, _ := Rerunnable(nil, Tool{Name: "x"}); got {
		t.Error("nil config: rerunnable")
	}
}

func TestRerunFileErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{`{"rules":[{"tool":"a","rerun":"yes"}]}`, `"rerun" must be true or false`},
		{`{"rules":[{"tool":"a","rerun":true,"ttl":"1m"}]}`, `need a "mode"`},
		{`{"rules":[{"tool":"a"}]}`, `or "rerun" alone`},
		{`{"rules":[{"tool":"a","rerun":true,"rerun":false}]}`, `duplicate field "rerun"`},
	} {
		_, err := ParseFile("r.json", []byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.file, err, tc.want)
		}
	}
	if _, err := NewRerunRule("[", true); err == nil {
		t.Error("a bad glob accepted")
	}
}
