package mdlinks

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	linkTarget = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
)

// Links are the link targets of md, outside code, in order.
func Links(md string) []string {
	var out []string
	for _, line := range proseLines(md) {
		line = codeSpan.ReplaceAllString(line, "")
		if m := refDef.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
			continue
		}
		for _, m := range linkTarget.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// Check returns one line for each broken relative link of the Markdown
// file at path: a file that does not exist, or an anchor that no heading
// of the target makes. Links with a scheme (https:, mailto:) are not
// followed.
func Check(path string) ([]string, error) {
	md, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, target := range Links(string(md)) {
		if msg := checkLink(path, string(md), target); msg != "" {
			problems = append(problems, fmt.Sprintf("%s: link %q: %s", path, target, msg))
		}
	}
	return problems, nil
}

// checkLink is what is wrong with one link of the file at from ("" if
// nothing).
func checkLink(from, md, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return err.Error()
	}
	if u.Scheme != "" || u.Host != "" || target == "" {
		return ""
	}
	doc := md
	if u.Path != "" {
		file := filepath.Join(filepath.Dir(from), filepath.FromSlash(u.Path))
		if _, err := os.Stat(file); err != nil {
			return "no such file " + file
		}
		if u.Fragment == "" || !strings.HasSuffix(file, ".md") {
			return ""
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err.Error()
		}
		doc = string(b)
	}
	if u.Fragment != "" && !Anchors(doc)[u.Fragment] {
		return "no heading makes the anchor #" + u.Fragment
	}
	return ""
}
