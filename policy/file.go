package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// FileError is what is wrong with a rules file, and where. Line and Column
// are 1-based; Column counts bytes.
type FileError struct {
	File         string
	Line, Column int
	// Rule is the 1-based index of the rule in the file's "rules" list, 0
	// when the error is not inside a rule.
	Rule int
	Msg  string
}

// Error reads "rules.json:3:14: msg" for a syntax error and
// "rules.json: rule 2 (line 7): msg" for a rule that is wrong.
func (e *FileError) Error() string {
	if e.Rule > 0 {
		return fmt.Sprintf("%s: rule %d (line %d): %s", e.File, e.Rule, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// ParseFile reads a rules file (format in doc.go). name is used in errors
// and in each rule's Source ("name:line"). Any error is a *FileError.
func ParseFile(name string, data []byte) (Rules, error) {
	p := &fileParser{name: name, data: data}
	return p.parse()
}

type fileParser struct {
	name string
	data []byte
	rule int // the rule being read, 1-based; 0 outside rules
}

func (p *fileParser) errAt(off int, format string, args ...any) *FileError {
	off = min(max(off, 0), len(p.data))
	line := 1 + bytes.Count(p.data[:off], []byte("\n"))
	col := off - (bytes.LastIndexByte(p.data[:off], '\n') + 1) + 1
	return &FileError{File: p.name, Line: line, Column: col, Rule: p.rule, Msg: fmt.Sprintf(format, args...)}
}

func (p *fileParser) parse() (Rules, error) {
	// First the syntax, so that it is reported with a position.
	dec := json.NewDecoder(bytes.NewReader(p.data))
	var doc json.RawMessage
	if err := dec.Decode(&doc); err != nil {
		return nil, p.syntaxError(err)
	}
	if end := int(dec.InputOffset()); !errors.Is(tokenErr(dec), io.EOF) {
		return nil, p.errAt(skipSpace(p.data, end), "unexpected data after the top-level object")
	}
	start := skipSpace(p.data, 0)
	if doc[0] != '{' {
		return nil, p.errAt(start, `the file must be a JSON object: {"rules": [...]}`)
	}
	var rules Rules
	seen := false
	err := p.object(p.data, 0, func(key string, keyOff int, val json.RawMessage, valOff int) error {
		if key != "rules" {
			return p.errAt(keyOff, "unknown field %q%s (the file holds {\"rules\": [...]})", key, suggest(key, "rules"))
		}
		if seen {
			return p.errAt(keyOff, `duplicate field "rules"`)
		}
		seen = true
		if val[0] != '[' {
			return p.errAt(valOff, `"rules" must be a list of rules`)
		}
		err := p.array(val, valOff, func(elem json.RawMessage, off int) error {
			p.rule++
			r, err := p.ruleAt(elem, off)
			if err != nil {
				return err
			}
			rules = append(rules, r)
			return nil
		})
		p.rule = 0
		return err
	})
	if err != nil {
		return nil, err
	}
	if !seen {
		return nil, p.errAt(start, `missing "rules": the file holds {"rules": [...]}`)
	}
	return rules, nil
}

func tokenErr(dec *json.Decoder) error {
	_, err := dec.Token()
	return err
}

// syntaxError positions a decoding error of the whole file.
func (p *fileParser) syntaxError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// Offset is just past the offending byte.
		off := int(se.Offset) - 1
		msg := strings.TrimPrefix(se.Error(), "json: ")
		if off == skipSpace(p.data, 0) {
			// Not JSON from its first byte: likely YAML under another name.
			msg += `: a rules file is JSON ({"rules": [...]}), or YAML named .yaml or .yml`
		}
		return p.errAt(off, "%s", msg)
	case err == io.EOF:
		return p.errAt(len(p.data), `empty file: want {"rules": [...]}`)
	case err == io.ErrUnexpectedEOF:
		return p.errAt(len(p.data), "unexpected end of file")
	}
	return p.errAt(0, "%v", err)
}

// ruleFields are the fields of a rule, for suggestions.
var ruleFields = []string{"tool", "mode", "annotations", "ttl", "pollInterval", "hybridWait", "rerun"}

// ruleAt reads the rule whose JSON starts at offset off of the file.
func (p *fileParser) ruleAt(raw json.RawMessage, off int) (Rule, error) {
	if raw[0] != '{' {
		return Rule{}, p.errAt(off, `a rule must be an object such as {"tool": "deploy_*", "mode": "task"}`)
	}
	r := Rule{Glob: "*", Source: p.name + ":" + strconv.Itoa(p.errAt(off, "").Line)}
	seen := map[string]bool{}
	var durOff [3]int // ttl, pollInterval, hybridWait: where each was set
	err := p.object(raw, off, func(key string, keyOff int, val json.RawMessage, valOff int) error {
		if seen[key] {
			return p.errAt(keyOff, "duplicate field %q", key)
		}
		seen[key] = true
		switch key {
		case "tool":
			s, err := p.str(key, val, valOff)
			if err != nil {
				return err
			}
			if err := checkGlob(s); err != nil {
				return p.errAt(valOff, "%v", err)
			}
			r.Glob = s
		case "mode":
			s, err := p.str(key, val, valOff)
			if err != nil {
				return err
			}
			m, ok := ParseMode(s)
			if !ok {
				return p.errAt(valOff, "unknown mode %q: want task, task-required, sync or auto", s)
			}
			r.Mode = m
		case "annotations":
			return p.annotations(val, valOff, &r.When)
		case "rerun":
			var b bool
			if string(val) != "true" && string(val) != "false" {
				return p.errAt(valOff, `"rerun" must be true or false`)
			}
			b = string(val) == "true"
			r.Rerun = &b
		case "ttl", "pollInterval", "hybridWait":
			d, err := p.duration(key, val, valOff)
			if err != nil {
				return err
			}
			switch key {
			case "ttl":
				r.TTL, durOff[0] = d, keyOff
			case "pollInterval":
				r.PollInterval, durOff[1] = d, keyOff
			default:
				r.HybridWait, durOff[2] = d, keyOff
			}
		default:
			return p.errAt(keyOff, "unknown field %q%s (a rule has %s)", key, suggest(key, ruleFields...), strings.Join(ruleFields, ", "))
		}
		return nil
	})
	if err != nil {
		return Rule{}, err
	}
	switch {
	case r.Mode == 0 && r.Rerun == nil:
		return Rule{}, p.errAt(off, `missing "mode": want task, task-required, sync or auto (or "rerun" alone)`)
	case r.Mode == 0 && (r.TTL > 0 || r.PollInterval > 0 || r.HybridWait > 0):
		return Rule{}, p.errAt(max(durOff[0], durOff[1], durOff[2]), `ttl, pollInterval and hybridWait need a "mode"`)
	case r.Mode == Sync && (r.TTL > 0 || r.PollInterval > 0):
		return Rule{}, p.errAt(max(durOff[0], durOff[1]), "a sync rule creates no task: ttl and pollInterval do not apply")
	case r.HybridWait > 0 && r.Mode != Task && r.Mode != Auto:
		return Rule{}, p.errAt(durOff[2], "hybridWait applies only to task and auto rules, not %s", r.Mode)
	}
	return r, nil
}

func (p *fileParser) str(key string, val json.RawMessage, off int) (string, error) {
	var s string
	if val[0] != '"' || json.Unmarshal(val, &s) != nil {
		return "", p.errAt(off, "%q must be a string", key)
	}
	return s, nil
}

func (p *fileParser) duration(key string, val json.RawMessage, off int) (time.Duration, error) {
	var s string
	if val[0] != '"' || json.Unmarshal(val, &s) != nil {
		return 0, p.errAt(off, `%q must be a duration string such as "500ms", "30s" or "2h"`, key)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, p.errAt(off, `%q: %q is not a positive duration such as "500ms", "30s" or "2h"`, key, s)
	}
	return d, nil
}

// annotationFields are the hints a rule may match on.
var annotationFields = []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}

func (p *fileParser) annotations(raw json.RawMessage, off int, a *Annotations) error {
	if raw[0] != '{' {
		return p.errAt(off, `"annotations" must be an object such as {"readOnlyHint": true}`)
	}
	seen := map[string]bool{}
	return p.object(raw, off, func(key string, keyOff int, val json.RawMessage, valOff int) error {
		if seen[key] {
			return p.errAt(keyOff, "duplicate annotation %q", key)
		}
		seen[key] = true
		var dst **bool
		switch key {
		case "readOnlyHint":
			dst = &a.ReadOnlyHint
		case "destructiveHint":
			dst = &a.DestructiveHint
		case "idempotentHint":
			dst = &a.IdempotentHint
		case "openWorldHint":
			dst = &a.OpenWorldHint
		default:
			return p.errAt(keyOff, "unknown annotation %q%s (want %s)", key, suggest(key, annotationFields...), strings.Join(annotationFields, ", "))
		}
		var b bool
		if string(val) != "true" && string(val) != "false" {
			return p.errAt(valOff, "annotation %q must be true or false", key)
		}
		b = string(val) == "true"
		*dst = &b
		return nil
	})
}

// object calls fn for each member of the JSON object raw, which starts at
// offset base of the file, with the offsets of the key and of the value.
// raw is known to be valid JSON.
func (p *fileParser) object(raw []byte, base int, fn func(key string, keyOff int, val json.RawMessage, valOff int) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return p.errAt(base, "%v", err)
	}
	for dec.More() {
		keyOff := skipSpace(raw, int(dec.InputOffset()))
		tok, err := dec.Token()
		if err != nil {
			return p.errAt(base+keyOff, "%v", err)
		}
		key, _ := tok.(string)
		valOff := skipSpace(raw, int(dec.InputOffset()))
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return p.errAt(base+valOff, "%v", err)
		}
		if err := fn(key, base+keyOff, val, base+valOff); err != nil {
			return err
		}
	}
	return nil
}

// array calls fn for each element of the JSON array raw, which starts at
// offset base of the file.
func (p *fileParser) array(raw []byte, base int, fn func(elem json.RawMessage, off int) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // [
		return p.errAt(base, "%v", err)
	}
	for dec.More() {
		off := skipSpace(raw, int(dec.InputOffset()))
		var elem json.RawMessage
		if err := dec.Decode(&elem); err != nil {
			return p.errAt(base+off, "%v", err)
		}
		if err := fn(elem, base+off); err != nil {
			return err
		}
	}
	return nil
}

// skipSpace returns the offset of the first byte at or after off that is
// not JSON whitespace or a separator (the decoder's offsets stop before them).
func skipSpace(b []byte, off int) int {
	for off < len(b) {
		switch b[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// suggest returns `: did you mean "x"?` when key is one of want but for
// case, "-" or "_".
func suggest(key string, want ...string) string {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) }
	for _, w := range want {
		if norm(key) == norm(w) {
			return fmt.Sprintf(" (did you mean %q?)", w)
		}
	}
	return ""
}
