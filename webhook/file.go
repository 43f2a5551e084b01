package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The --webhooks file is JSON, like the rules file (docs/policy.md, and
// for the same reasons: the standard library reads it, one spelling per
// value), read strictly: unknown fields are errors, a syntax error carries
// line:column, and a wrong endpoint is "webhooks.json: endpoint 2
// ("chat"): secrets[0]: …".
//
//	{
//	  "endpoints": [
//	    {"name": "chat", "url": "https://hooks.example.com/taskgate",
//	     "secrets": ["whsec_…"], "events": ["task.input_required"],
//	     "tools": ["deploy_*"], "principals": ["principal:…"]}
//	  ]
//	}

// FileError is what is wrong with a --webhooks file, and where.
type FileError struct {
	File string
	// Line and Column (1-based) locate a syntax error; 0 otherwise.
	Line, Column int
	// Endpoint is the 1-based index of the endpoint at fault, 0 when the
	// error is not inside one; Name its name, when it has one.
	Endpoint int
	Name     string
	Err      error
}

func (e *FileError) Error() string {
	switch {
	case e.Endpoint > 0 && e.Name != "":
		return fmt.Sprintf("%s: endpoint %d (%q): %v", e.File, e.Endpoint, e.Name, e.Err)
	case e.Endpoint > 0:
		return fmt.Sprintf("%s: endpoint %d: %v", e.File, e.Endpoint, e.Err)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %v", e.File, e.Line, e.Column, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// ParseFile reads a --webhooks file. name is used in errors. Any error is
// a *FileError, and never contains a secret.
func ParseFile(name string, data []byte) ([]Endpoint, error) {
	var doc struct {
		Endpoints []json.RawMessage `json:"endpoints"`
	}
	if err := strictDecode(data, &doc); err != nil {
		return nil, syntaxError(name, data, err)
	}
	if doc.Endpoints == nil {
		return nil, &FileError{File: name, Err: errors.New(`the file must be {"endpoints": [...]}`)}
	}
	eps := make([]Endpoint, 0, len(doc.Endpoints))
	seen := map[string]int{}
	for i, raw := range doc.Endpoints {
		var e Endpoint
		if err := strictDecode(raw, &e); err != nil {
			return nil, &FileError{File: name, Endpoint: i + 1, Err: decodeCause(err, endpointFields)}
		}
		fe := &FileError{File: name, Endpoint: i + 1, Name: e.Name}
		if err := e.Check(); err != nil {
			fe.Err = err
			return nil, fe
		}
		if j, dup := seen[e.Name]; dup {
			fe.Err = fieldErr("name", "endpoint %d has the same name", j)
			return nil, fe
		}
		seen[e.Name] = i + 1
		eps = append(eps, e)
	}
	return eps, nil
}

// endpointFields are an endpoint's fields, for errors.
const endpointFields = "name, url, secrets, events, tools, principals"

// strictDecode decodes exactly one JSON value with no unknown fields.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &trailingError{off: dec.InputOffset()}
	}
	return nil
}

type trailingError struct{ off int64 }

func (e *trailingError) Error() string { return "unexpected data after the top-level object" }

// syntaxError places a decoding error of the whole file by line:column
// when it has an offset.
func syntaxError(name string, data []byte, err error) *FileError {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var tr *trailingError
	switch {
	case errors.As(err, &se):
		off = max(se.Offset-1, 0) // the offending byte is the last one read
	case errors.As(err, &te):
		off = te.Offset
	case errors.As(err, &tr):
		off = tr.off
	}
	fe := &FileError{File: name, Err: decodeCause(err, `{"endpoints": [...]}`)}
	if off >= 0 {
		off = min(off, int64(len(data)))
		fe.Line = 1 + bytes.Count(data[:off], []byte("\n"))
		fe.Column = int(off) - (bytes.LastIndexByte(data[:off], '\n') + 1) + 1
	}
	return fe
}

// decodeCause words encoding/json's errors for a person editing the file.
func decodeCause(err error, known string) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fieldErr(te.Field, "want %s, got a JSON %s", jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fmt.Errorf("want a JSON object, got a JSON %s", te.Value)
	}
	if errors.Is(err, io.EOF) {
		return errors.New("empty: want a JSON object")
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return fmt.Errorf("unknown field %s (want %s)", f, known)
	}
	return errors.New(msg)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "slice":
		return "a list"
	case "string":
		return "a string"
	case "struct":
		return "an object"
	}
	return goKind
}
