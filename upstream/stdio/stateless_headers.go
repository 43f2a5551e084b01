package stdio

// Mcp-Param-* headers of a tools/call, checked as the server would check
// them over HTTP (MCP 2026-07-28, Streamable HTTP transport, "Custom
// Headers from Tool Parameters" and "Server Validation"): a stdio server
// never sees the headers, so the bridge, the HTTP side of it, does.
//
// The annotations come from the child's tools/list, asked by the bridge
// and kept until the child says its tools changed or restarts (a call
// naming a tool not in it lists again, at most once per relistUnknown).
// When they cannot be read, a tools/call is refused rather than passed
// unchecked.

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
	"time"
	"unicode/utf8"
)

// paramHeader is one x-mcp-header annotation: the argument at path goes
// into the header Mcp-Param-{name}.
type paramHeader struct {
	path []string
	name string
}

// toolHeaders holds the annotations of the child's tools. A complete
// listing is authoritative until the child says its tools changed (or
// restarts): a call naming a tool not in it lists again at most once per
// relistUnknown, so calls to a tool that does not exist cost no listing
// each, and one listing at a time is made, without holding up the calls
// to known tools.
type toolHeaders struct {
	list sync.Mutex // held while listing: concurrent misses wait for one listing

	mu       sync.Mutex
	byTool   map[string][]paramHeader // nil: not known
	listedAt time.Time                // when byTool was read
	gen      uint64                   // forget calls; a listing started before one is not kept
}

// relistUnknown: how often a call naming a tool not in a complete listing
// may list the tools again (a child that added a tool without saying so).
const relistUnknown = 10 * time.Second

// errUnchecked: the Mcp-Param headers of a call cannot be checked, since
// the tools' annotations cannot be read; the call is refused (fail closed).
var errUnchecked = errors.New("cannot check the Mcp-Param headers")

func (t *toolHeaders) forget() {
	t.mu.Lock()
	t.byTool = nil
	t.gen++
	t.mu.Unlock()
}

// lookup is tool's annotations when they are known, or the tool known to
// be absent (found false, settled true); settled false: list again.
func (t *toolHeaders) lookup(tool string, now time.Time) (hs []paramHeader, settled bool, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byTool == nil {
		return nil, false, t.gen
	}
	if hs, ok := t.byTool[tool]; ok {
		return hs, true, t.gen
	}
	return nil, now.Sub(t.listedAt) < relistUnknown, t.gen
}

// maxToolPages bounds the tools/list pages read for the annotations.
const maxToolPages = 100

// annotations returns tool's annotations (none for a tool the child does
// not list), reading the child's tools/list when they are not known, or
// the tool is not in a listing older than relistUnknown.
func (st *statelessSide) annotations(ctx context.Context, p *proc, tool string) ([]paramHeader, error) {
	t := &st.tools
	if hs, settled, _ := t.lookup(tool, time.Now()); settled {
		return hs, nil
	}
	t.list.Lock()
	defer t.list.Unlock()
	hs, settled, gen := t.lookup(tool, time.Now()) // listed while this call waited
	if settled {
		return hs, nil
	}
	byTool := map[string][]paramHeader{}
	cursor := ""
	for page := 0; page < maxToolPages; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := st.ask(ctx, p, "tools/list", params)
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
	t.mu.Lock()
	if t.gen == gen { // else the tools changed while listing: list again next time
		t.byTool, t.listedAt = byTool, time.Now()
	}
	t.mu.Unlock()
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
func (st *statelessSide) checkParamHeaders(r *http.Request, p *proc, params json.RawMessage) error {
	b := st.b
	var call struct {
		Name      string                     `json:"name"`
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &call) != nil || call.Name == "" {
		return nil // the child answers what is malformed
	}
	ctx, cancel := context.WithTimeout(r.Context(), b.opts.InitTimeout)
	defer cancel()
	hs, err := st.annotations(ctx, p, call.Name)
	if err != nil {
		b.log.Warn().Str("op", "stdio").Str("tool", call.Name).Err(err).Msg("cannot read the tools' x-mcp-header annotations; the call is refused")
		return fmt.Errorf("%w: the upstream process's tools/list failed: %v", errUnchecked, err)
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
