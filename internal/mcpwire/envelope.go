package mcpwire

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// scanEnvelope is Parse's fast path: it fills m's envelope fields from
// body, a JSON object, the way json.Unmarshal into Message would, without
// reflection. Pass-through is most of a gateway's traffic, and decoding the
// envelope by reflection was the largest share of the CPU the gateway's own
// code spent per relayed call. Where its answer could differ from
// json.Unmarshal's, it returns false and Parse decodes with json.Unmarshal:
// invalid JSON, a key with an escape or non-ASCII bytes or one that matches
// a field only case-insensitively (encoding/json folds case), and a
// jsonrpc or method that is not a plain string (an escape, invalid UTF-8,
// null or another type). FuzzScanEnvelope holds it to json.Unmarshal's
// results.
func scanEnvelope(body []byte, m *Message) bool {
	if !json.Valid(body) {
		return false
	}
	i := skipSpace(body, 1) // after '{'
	if body[i] == '}' {
		return true
	}
	for {
		// A key: valid JSON, so a string.
		end := stringEnd(body, i)
		key := body[i+1 : end-1]
		i = skipSpace(body, end)
		i = skipSpace(body, i+1) // ':'
		vEnd := valueEnd(body, i)
		val := body[i:vEnd]
		if !setField(m, key, val) {
			return false
		}
		i = skipSpace(body, vEnd)
		if body[i] == '}' {
			return true
		}
		i = skipSpace(body, i+1) // ','
	}
}

var (
	keyID      = []byte("id")
	keyMethod  = []byte("method")
	keyParams  = []byte("params")
	keyResult  = []byte("result")
	keyError   = []byte("error")
	keyVersion = []byte("jsonrpc")
	envKeys    = [][]byte{keyID, keyMethod, keyParams, keyResult, keyError, keyVersion}
)

// setField stores val under key as json.Unmarshal would, or reports that
// it cannot tell (false).
func setField(m *Message, key, val []byte) bool {
	switch {
	case bytes.Equal(key, keyID):
		m.ID = append(json.RawMessage(nil), val...)
	case bytes.Equal(key, keyParams):
		m.Params = append(json.RawMessage(nil), val...)
	case bytes.Equal(key, keyResult):
		m.Result = append(json.RawMessage(nil), val...)
	case bytes.Equal(key, keyError):
		m.Error = append(json.RawMessage(nil), val...)
	case bytes.Equal(key, keyMethod):
		s, ok := plainString(val)
		if !ok {
			return false
		}
		m.Method = &s
	case bytes.Equal(key, keyVersion):
		s, ok := plainString(val)
		if !ok {
			return false
		}
		m.Version = s
	default:
		for _, b := range key {
			if b == '\\' || b >= utf8.RuneSelf {
				return false
			}
		}
		for _, k := range envKeys {
			if bytes.EqualFold(key, k) {
				return false
			}
		}
	}
	return true
}

// plainString is the content of a JSON string with no escapes and valid
// UTF-8 (json.Unmarshal would give the same string).
func plainString(val []byte) (string, bool) {
	if len(val) < 2 || val[0] != '"' {
		return "", false
	}
	s := val[1 : len(val)-1]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return "", false
	}
	return string(s), true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd is the index after the string starting at b[i] ('"').
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// valueEnd is the index after the (valid) JSON value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i
			}
			i++
		}
		return len(b)
	}
}
