package console

// Where the login form sends the operator afterwards ("next"): a path on
// the console, never another site. A browser cleans a Location up before
// resolving it (WHATWG URL Standard, basic URL parser): it strips leading
// and trailing C0 controls and spaces, removes every tab and newline,
// reads '\' as '/' in http(s) URLs, and "//host" is another host (RFC
// 3986 §4.2, a network-path reference). So "/\t/evil.example" is
// "//evil.example" to it. A proxy or server may also decode the path once
// ("/%2F%2Fevil" to "///evil"). safeNext keeps only what none of these
// turns into another origin, and answers "/" for anything else.

import (
	"net/url"
	"strings"
)

// maxNext bounds next: the console's own links are short.
const maxNext = 2048

// safeNext keeps a post-login redirect on the console: a local path only.
func safeNext(n string) string {
	if !localPath(n) {
		return "/"
	}
	return n
}

// localPath says whether n is an absolute path (with a query, perhaps)
// of printable ASCII, without '\', that stays a path once decoded.
func localPath(n string) bool {
	if n == "" || len(n) > maxNext || n[0] != '/' || strings.HasPrefix(n, "//") || !plain(n) {
		return false
	}
	path, _, _ := strings.Cut(n, "?")
	path, _, _ = strings.Cut(path, "#")
	dec, err := url.PathUnescape(path)
	if err != nil || strings.HasPrefix(dec, "//") || !plain(dec) {
		return false
	}
	u, err := url.Parse(n)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil && u.Opaque == ""
}

// plain says whether s is printable ASCII without a space or '\'.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}
