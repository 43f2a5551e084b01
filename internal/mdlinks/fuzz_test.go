package mdlinks

import (
	"strings"
	"testing"
	"unicode"
)

// FuzzMarkdown: any text parses into links and anchors without a panic,
// and every anchor a heading makes has only the characters GitHub keeps.
func FuzzMarkdown(f *testing.F) {
	f.Add("# HTTP+SSE servers\n[a](#httpsse-servers) [b](x.md#y)\n")
	f.Add("```\n# no\n```\n[r]: <t.md#a> \"title\"\n## Repeat\n## Repeat\n")
	f.Add("<a id=\"x\"></a> `[c](code.md)` ~~~\n[d](e.md)")
	f.Fuzz(func(t *testing.T, md string) {
		_ = Links(md)
		for a := range Anchors(md) {
			if strings.ContainsFunc(a, func(r rune) bool {
				return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_'
			}) && !strings.Contains(md, `"`+a+`"`) { // an explicit id is taken as written
				t.Errorf("anchor %q of %q", a, md)
			}
		}
	})
}
