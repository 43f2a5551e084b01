package policy

import (
	"fmt"
	"path"
	"unicode/utf8"
)

// Tool globs have path.Match's syntax, but a tool name is one name, not a
// path: * and ? (and classes) match "/" like any other character, so
// "*_issue" matches "github/create_issue". match runs on every call for
// every rule until one matches, so it does not allocate.

// checkGlob reports a glob path.Match would reject.
func checkGlob(glob string) error {
	if glob == "" {
		return fmt.Errorf("empty tool glob")
	}
	if _, err := path.Match(glob, ""); err != nil {
		return fmt.Errorf("bad tool glob %q: %v", glob, err)
	}
	return nil
}

// match reports whether name matches glob. A malformed glob matches
// nothing (checkGlob keeps them out of rules).
func match(glob, name string) bool {
	// Greedy, with one backtrack point: the last * seen. Every other token
	// consumes exactly one character, so retrying from the last * suffices.
	star, starName := -1, 0
	p, n := 0, 0
	for n < len(name) {
		if p < len(glob) {
			switch c := glob[p]; c {
			case '*':
				star, starName = p, n
				p++
				continue
			case '?':
				_, w := utf8.DecodeRuneInString(name[n:])
				p, n = p+1, n+w
				continue
			case '[':
				r, w := utf8.DecodeRuneInString(name[n:])
				ok, size, valid := matchClass(glob[p:], r)
				if !valid {
					return false
				}
				if ok {
					p, n = p+size, n+w
					continue
				}
			case '\\':
				if p+1 < len(glob) && glob[p+1] == name[n] {
					p, n = p+2, n+1
					continue
				}
			default:
				if c == name[n] {
					p, n = p+1, n+1
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		// Let the last * take one more character and retry after it.
		_, w := utf8.DecodeRuneInString(name[starName:])
		starName += w
		p, n = star+1, starName
	}
	for p < len(glob) && glob[p] == '*' {
		p++
	}
	return p == len(glob)
}

// matchClass matches r against the class that opens class ("[...]"). It
// returns whether r is in it, the class's length in bytes, and false for
// valid when the class is malformed.
func matchClass(class string, r rune) (in bool, size int, valid bool) {
	i := 1
	negated := i < len(class) && class[i] == '^'
	if negated {
		i++
	}
	for ranges := 0; ; ranges++ {
		if i < len(class) && class[i] == ']' && ranges > 0 {
			return in != negated, i + 1, true
		}
		lo, w, ok := classChar(class[i:])
		if !ok {
			return false, 0, false
		}
		i += w
		hi := lo
		if i < len(class) && class[i] == '-' {
			if hi, w, ok = classChar(class[i+1:]); !ok {
				return false, 0, false
			}
			i += 1 + w
		}
		if lo <= r && r <= hi {
			in = true
		}
	}
}

// classChar reads one character of a class, escaped or not.
func classChar(s string) (r rune, size int, ok bool) {
	if s == "" || s[0] == '-' || s[0] == ']' {
		return 0, 0, false
	}
	esc := 0
	if s[0] == '\\' {
		if esc = 1; len(s) == 1 {
			return 0, 0, false
		}
	}
	r, w := utf8.DecodeRuneInString(s[esc:])
	if r == utf8.RuneError && w == 1 {
		return 0, 0, false
	}
	return r, esc + w, true
}

// CheckGlob reports a tool glob that would match nothing because it is
// malformed (path.Match's syntax), for other packages that filter by tool
// with the same globs as the rules (the webhook endpoints' tool filters).
func CheckGlob(glob string) error { return checkGlob(glob) }

// MatchGlob reports whether the tool name matches glob, with the rules'
// semantics: * and ? match "/" too. A malformed glob matches nothing.
func MatchGlob(glob, name string) bool { return match(glob, name) }
