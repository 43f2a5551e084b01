package policy

import (
	"path"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		glob, name string
		want       bool
	}{
		{"*", "", true},
		{"*", "gh/create_issue", true},
		{"*_issue", "github/create_issue", true},
		{"*_issue", "github/create_pr", false},
		{"gh/*", "gh/a/b", true},
		{"gh?x", "gh/x", true},
		{"[a-c]*", "b/x", true},
		{"[^a-c]*", "b/x", false},
		{"[/]x", "/x", true},
		{"report?", "report1", true},
		{"report?", "report12", false},
		{"caf?", "café", true},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"*a*a*a*a*b", strings.Repeat("a", 64), false},
		{"[a-", "a", false}, // malformed: matches nothing
	}
	for _, tt := range tests {
		if got := match(tt.glob, tt.name); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.glob, tt.name, got, tt.want)
		}
	}
}

// FuzzMatch: on names without "/", where path.Match's separator rule
// cannot matter, match agrees with path.Match (TestMatch covers "/").
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"*_issue", "create_issue"}, {"[a-c]?x*", "bqxyz"}, {`\[*`, "[x"}, {"[^é]", "é"}, {"a*b?[!-~]", "aXXbY!"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, glob, name string) {
		if checkGlob(glob) != nil || strings.Contains(name, "/") {
			return
		}
		want, _ := path.Match(glob, name)
		if got := match(glob, name); got != want {
			t.Fatalf("match(%q, %q) = %v, path.Match says %v", glob, name, got, want)
		}
	})
}
