package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The helpers below change one member of a JSON object and keep the
// others as they were (re-encoded compactly, so unknown members survive
// with their meaning).

// errNotObject: the value is not a JSON object.
var errNotObject = errors.New("not a JSON object")

// WithMember returns the JSON object obj with member key set to value
// (raw JSON); every other member is kept.
func WithMember(obj json.RawMessage, key string, value json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errNotObject
	}
	m[key] = value
	return json.Marshal(m)
}

// WithoutMember returns the JSON object obj without member key.
func WithoutMember(obj json.RawMessage, key string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil || m == nil {
		return nil, errNotObject
	}
	delete(m, key)
	return json.Marshal(m)
}

// WithMeta returns the JSON object obj with _meta[key] = value added,
// keeping every other member (and other _meta keys) as they were. obj may
// be empty (then it is {}). A non-object obj is returned unchanged.
func WithMeta(obj json.RawMessage, key string, value any) json.RawMessage {
	m := map[string]json.RawMessage{}
	if len(obj) > 0 && string(obj) != "null" {
		if err := json.Unmarshal(obj, &m); err != nil {
			return obj
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta) // a non-object _meta is replaced
	}
	v, err := json.Marshal(value)
	if err != nil {
		return obj
	}
	meta[key] = v
	if m["_meta"], err = json.Marshal(meta); err != nil {
		return obj
	}
	out, err := json.Marshal(m)
	if err != nil {
		return obj
	}
	return out
}

// MustMarshal encodes v, a value the caller built from strings, numbers
// and JSON it decoded itself (so valid): a failure is a bug in the caller,
// and it panics saying so.
func MustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("mcpwire: cannot encode a %T the gateway built: %v", v, err))
	}
	return b
}

// SameID compares two JSON-RPC ids by value (1 and 1.0, "a" and "\u0061").
func SameID(a, b json.RawMessage) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return va == vb
}

// IsObject reports whether raw is (starts as) a JSON object.
func IsObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// PlainString sets *s to the JSON string raw when it is quoted printable
// ASCII without escapes, which json.Unmarshal would decode to the same
// bytes, and reports whether it did.
func PlainString(raw json.RawMessage, s *string) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	*s = string(raw[1 : len(raw)-1])
	return true
}
