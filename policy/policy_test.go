package policy

import "testing"

func mustRules(t *testing.T, specs ...any) Rules {
	t.Helper()
	var rs Rules
	for i := 0; i < len(specs); i += 2 {
		r, err := NewRule(specs[i].(string), specs[i+1].(Mode))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

func TestLegacy(t *testing.T) {
	rules := mustRules(t,
		"deploy_*", TaskRequired,
		"deploy_preview", Task, // shadowed: first match wins
		"report?", Task,
		"gh/*", Task,
		"quick*", Sync,
		"*", Task,
	)
	tests := []struct {
		tool     string
		upstream TaskSupport
		want     TaskSupport
	}{
		{"deploy_prod", "", TaskSupportRequired},
		{"deploy_preview", "", TaskSupportRequired},
		{"report1", "", TaskSupportOptional},
		{"gh/create_issue", "", TaskSupportOptional},
		{"quickcheck", TaskSupportOptional, TaskSupportAbsent}, // --sync removes even the upstream's
		{"anything", "", TaskSupportOptional},
	}
	for _, tt := range tests {
		if got, _ := Legacy(rules, tt.tool, tt.upstream); got != tt.want {
			t.Errorf("Legacy(%q, upstream %q) = %q, want %q", tt.tool, tt.upstream, got, tt.want)
		}
	}
	// No rule: the upstream's word stands.
	for _, up := range []TaskSupport{"", TaskSupportForbidden, TaskSupportOptional, TaskSupportRequired} {
		if got, reason := Legacy(nil, "x", up); got != up || reason == "" {
			t.Errorf("no rules, upstream %q: got %q (%q)", up, got, reason)
		}
	}
}

func TestGlobCrossesSlash(t *testing.T) {
	rules := mustRules(t, "*_issue", Task)
	if _, _, ok := rules.Match("github/create_issue"); !ok {
		t.Error("* should match across / in tool names")
	}
	if _, _, ok := rules.Match("github/create_pr"); ok {
		t.Error("matched a name the glob does not cover")
	}
}

func TestNewRuleRejectsBadGlob(t *testing.T) {
	if _, err := NewRule("[a-", Task); err == nil {
		t.Error("bad glob accepted")
	}
	if _, err := NewRule("", Task); err == nil {
		t.Error("empty glob accepted")
	}
}

func TestAllowsTask(t *testing.T) {
	for ts, want := range map[TaskSupport]bool{"": false, "forbidden": false, "optional": true, "required": true} {
		if ts.AllowsTask() != want {
			t.Errorf("%q.AllowsTask() = %v", ts, !want)
		}
	}
}
