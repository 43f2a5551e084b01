package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ParseRulesFile reads a rules file in JSON or YAML: by its name
// (.yaml/.yml is YAML, .json is JSON), else by its content (JSON starts
// with "{"). A YAML file is read as the JSON document it stands for and
// checked by ParseFile, with each value on its YAML line, so an error
// names the rule and the line in the YAML file. Any error is a
// *FileError.
func ParseRulesFile(name string, data []byte) (Rules, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml":
		return parseYAML(name, data)
	case ".json":
		return ParseFile(name, data)
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		return ParseFile(name, data)
	}
	return parseYAML(name, data)
}

func parseYAML(name string, data []byte) (Rules, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &FileError{File: name, Line: yamlErrLine(err), Column: 1, Msg: "not YAML (or JSON): " + yamlErrMsg(err)}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &FileError{File: name, Line: 1, Column: 1, Msg: `the file is empty: it holds {"rules": [...]}`}
	}
	if top := doc.Content[0]; top.Kind != yaml.MappingNode {
		return nil, &FileError{File: name, Line: top.Line, Column: top.Column, Msg: "the file must be a mapping with a list of rules (rules: [...])"}
	}
	w := &lineWriter{}
	if err := w.node(doc.Content[0], 0); err != nil {
		var fe *FileError
		if errors.As(err, &fe) {
			fe.File = name
		}
		return nil, err
	}
	return ParseFile(name, w.buf.Bytes())
}

// lineWriter writes a YAML node tree as JSON, each node starting on the
// line it had in the YAML file (newlines are added before it), so the
// JSON parser's line numbers are the YAML file's.
type lineWriter struct {
	buf  bytes.Buffer
	line int // the line being written, 1-based
}

// maxYAMLDepth bounds nesting (and aliases that refer to themselves).
const maxYAMLDepth = 64

func (w *lineWriter) node(n *yaml.Node, depth int) error {
	if depth > maxYAMLDepth {
		return &FileError{Line: n.Line, Column: n.Column, Msg: "nested too deep"}
	}
	w.pad(n.Line)
	switch n.Kind {
	case yaml.AliasNode:
		return &FileError{Line: n.Line, Column: n.Column, Msg: "YAML aliases are not allowed in a rules file; write the value out"}
	case yaml.MappingNode:
		w.buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return &FileError{Line: k.Line, Column: k.Column, Msg: "a key must be a plain name"}
			}
			w.pad(k.Line)
			if err := w.scalar(k, true); err != nil {
				return err
			}
			w.buf.WriteByte(':')
			if err := w.node(n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		w.buf.WriteByte('}')
	case yaml.SequenceNode:
		w.buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			if err := w.node(c, depth+1); err != nil {
				return err
			}
		}
		w.buf.WriteByte(']')
	case yaml.ScalarNode:
		return w.scalar(n, false)
	default:
		return &FileError{Line: n.Line, Column: n.Column, Msg: "not a value a rules file holds"}
	}
	return nil
}

// pad adds newlines until the output is on line (1-based).
func (w *lineWriter) pad(line int) {
	if w.line == 0 {
		w.line = 1
	}
	for w.line < line {
		w.buf.WriteByte('\n')
		w.line++
	}
}

// scalar writes a scalar as the JSON value its YAML tag says it is: a
// string, a number, true/false or null (asKey: always a string).
func (w *lineWriter) scalar(n *yaml.Node, asKey bool) error {
	tag := n.ShortTag()
	switch {
	case asKey || tag == "!!str" || tag == "!!timestamp" || tag == "!!binary":
		b, _ := json.Marshal(n.Value)
		w.buf.Write(b)
	case tag == "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return &FileError{Line: n.Line, Column: n.Column, Msg: fmt.Sprintf("%q is not true or false", n.Value)}
		}
		fmt.Fprint(&w.buf, v)
	case tag == "!!null":
		w.buf.WriteString("null")
	case tag == "!!int" || tag == "!!float":
		if !json.Valid([]byte(n.Value)) {
			// 0x1F, .inf, 1_000: YAML numbers JSON has no spelling for.
			return &FileError{Line: n.Line, Column: n.Column, Msg: fmt.Sprintf("write the number %q in decimal", n.Value)}
		}
		w.buf.WriteString(n.Value)
	default:
		return &FileError{Line: n.Line, Column: n.Column, Msg: fmt.Sprintf("the YAML tag %s is not allowed in a rules file", tag)}
	}
	return nil
}

// yamlErrLine is the line a yaml error names ("yaml: line 3: ..."), or 1.
func yamlErrLine(err error) int {
	var line int
	if _, scanErr := fmt.Sscanf(err.Error(), "yaml: line %d:", &line); scanErr == nil && line > 0 {
		return line
	}
	return 1
}

// yamlErrMsg is the yaml error without its "yaml: line N: " prefix.
func yamlErrMsg(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if _, after, found := strings.Cut(rest, ": "); found {
			return after
		}
	}
	return msg
}
