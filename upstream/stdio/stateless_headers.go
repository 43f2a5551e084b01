package stdio

// Mcp-Param-* headers of a tools/call, checked as the server would check
// them over HTTP (MCP 2026-07-28, Streamable HTTP transport, "Custom
// Headers from Tool Parameters" and "Server Validation"): a stdio server
// never sees the headers, so the bridge, the HTTP side of it, does.
//
// The annotations come from the child's tools/list, asked by the bridge
// and kept until the child says its tools changed, a call names a tool
// not in it, or the child restarts.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// paramHeader is one x-mcp-header annotation: the argument at path goes
// into the header Mcp-Param-{name}.
type paramHeader struct {
	path []string
	name string
}

// toolHeaders holds the annotations of the child's tools.
type toolHeaders struct {
	mu     sync.Mutex
	byTool map[string][]paramHeader // nil: not known
}

func (t *toolHeaders) forget() {
	t.mu.Lock()
	t.byTool = nil
	t.mu.Unlock()
}

// maxToolPages bounds the tools/list pages read for the annotations.
const maxToolPages = 100

// annotations returns tool's annotations, reading the child's tools/list
// when they are not known (or the tool is not among them).
func (b *Bridge) annotations(ctx context.Context, p *proc, tool string) ([]paramHeader, error) {
	t := &b.st.tools
	t.mu.Lock() // held while reading: concurrent calls wait for one read
	defer t.mu.Unlock()
	if hs, ok := t.byTool[tool]; ok {
		return hs, nil
	}
	byTool := map[string][]paramHeader{}
	cursor := ""
	for page := 0; page < maxToolPages; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := b.ask(ctx, p, "tools/list", params)
		if err != nil {
			return nil, err
		}
		var list struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &list); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, tl := range list.Tools {
			byTool[tl.Name] = headerAnnotations(tl.InputSchema, nil, nil)
		}
		if cursor = list.NextCursor; cursor == "" {
			break
		}
	}
	t.byTool = byTool
	return byTool[tool], nil
}

// schemaNode is what the annotations need of a JSON Schema.
type schemaNode struct {
	Header     json.RawMessage       `json:"x-mcp-header"`
	Properties map[string]schemaNode `json:"properties"`
}

// headerAnnotations collects the x-mcp-header annotations reachable from
// the schema root through properties alone ("Schema Extension").
func headerAnnotations(schema json.RawMessage, path []string, out []paramHeader) []paramHeader {
	var n schemaNode
	if json.Unmarshal(schema, &n) != nil {
		return out
	}
	return collectHeaders(n, path, out)
}

func collectHeaders(n schemaNode, path []string, out []paramHeader) []paramHeader {
	for key, prop := range n.Properties {
		at := append(append([]string(nil), path...), key)
		var name string
		if json.Unmarshal(prop.Header, &name) == nil && name != "" {
			out = append(out, paramHeader{path: at, name: name})
		}
		out = collectHeaders(prop, at, out)
	}
	return out
}

// checkParamHeaders checks the Mcp-Param-* headers of a tools/call with
// params against the tool's annotations: each annotated argument present
// (and not null) needs its header, equal to it once decoded; an absent one
// must have none.
func (b *Bridge) checkParamHeaders(r *http.Request, p *proc, params json.RawMessage) error {
	var call struct {
		Name      string                     `json:"name"`
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &call) != nil || call.Name == "" {
		return nil // the child answers what is malformed
	}
	ctx, cancel := context.WithTimeout(r.Context(), b.opts.InitTimeout)
	defer cancel()
	hs, err := b.annotations(ctx, p, call.Name)
	if err != nil {
		b.log.Warn().Str("op", "stdio").Err(err).Msg("cannot read the tools' x-mcp-header annotations; Mcp-Param headers unchecked")
		return nil
	}
	for _, h := range hs {
		header := "Mcp-Param-" + h.name
		values := r.Header.Values(header)
		arg, ok := argumentAt(call.Arguments, h.path)
		switch {
		case !ok || string(arg) == "null":
			if len(values) > 0 {
				return fmt.Errorf("%s header sent for the absent parameter %q", header, strings.Join(h.path, "."))
			}
			continue
		case len(values) == 0:
			return fmt.Errorf("the %s header is required for parameter %q", header, strings.Join(h.path, "."))
		case len(values) > 1:
			return fmt.Errorf("more than one %s header", header)
		}
		v, err := decodeParam(values[0])
		if err != nil {
			return fmt.Errorf("%s header: %w", header, err)
		}
		if !sameValue(v, arg) {
			return fmt.Errorf("%s header value '%s' does not match body value %s", header, values[0], arg)
		}
	}
	return nil
}

// argumentAt is the argument at path, following object members.
func argumentAt(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	v, ok := args[path[0]]
	for _, key := range path[1:] {
		if !ok {
			return nil, false
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			return nil, false
		}
		v, ok = obj[key]
	}
	return v, ok
}

// decodeParam decodes a header value ("Value Encoding"): =?base64?…?= is
// strict standard Base64 of UTF-8; a plain value must be visible ASCII,
// spaces and tabs.
func decodeParam(v string) (string, error) {
	if enc, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if enc, ok = strings.CutSuffix(enc, "?="); ok {
			raw, err := base64.StdEncoding.Strict().DecodeString(enc)
			if err != nil || !utf8.Valid(raw) {
				return "", errors.New("invalid Base64")
			}
			return string(raw), nil
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c >= 0x7f {
			return "", errors.New("invalid characters")
		}
	}
	return v, nil
}

// sameValue compares a decoded header with the argument: a string as is,
// a boolean as true/false, an integer numerically (42 and 42.0 agree);
// any other argument never matches (annotations are on primitives only).
func sameValue(header string, arg json.RawMessage) bool {
	var v any
	if json.Unmarshal(arg, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case string:
		return header == v
	case bool:
		return header == strconv.FormatBool(v)
	case float64:
		h, err := strconv.ParseFloat(strings.TrimSpace(header), 64)
		return err == nil && v == math.Trunc(v) && h == v
	}
	return false
}
