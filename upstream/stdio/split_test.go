package stdio

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
		err  string
	}{
		{"npx -y @modelcontextprotocol/server-everything stdio", []string{"npx", "-y", "@modelcontextprotocol/server-everything", "stdio"}, ""},
		{`python -m  my_server   --name 'two words'`, []string{"python", "-m", "my_server", "--name", "two words"}, ""},
		{`a "b \"c\" \$HOME \x" d\ e`, []string{"a", `b "c" $HOME \x`, "d e"}, ""},
		{`a ''b'' "" x`, []string{"a", "b", "", "x"}, ""},
		{"a\\\nb", []string{"ab"}, ""},
		{"python -m server \\\n  --flag x", []string{"python", "-m", "server", "--flag", "x"}, ""},
		{`echo $HOME ~`, []string{"echo", "$HOME", "~"}, ""},
		{"", nil, "empty"},
		{"   ", nil, "empty"},
		{`a 'b`, nil, "unclosed single quote"},
		{`a "b`, nil, "unclosed double quote"},
		{`a \`, nil, "lone backslash"},
		{`a | b`, nil, `operator '|'`},
		{`a 'x|y' "p;q"`, []string{"a", "x|y", "p;q"}, ""},
	} {
		got, err := SplitCommand(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %v, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%q = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// FuzzSplitCommand: never panics; a success has at least one word, and
// quoting each word back in single quotes splits to the same words.
func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{"a b", `a "b c"`, `a 'b'`, `a\ b`, `"\""`, "|", "", `'`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		words, err := SplitCommand(in)
		if err != nil {
			return
		}
		if len(words) == 0 {
			t.Fatalf("%q: no words and no error", in)
		}
		var b strings.Builder
		for _, w := range words {
			b.WriteString("'" + strings.ReplaceAll(w, "'", `'\''`) + "' ")
		}
		again, err := SplitCommand(b.String())
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("%q → %q, requoted %q → %q, %v", in, words, b.String(), again, err)
		}
	})
}
