package core

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// DecodeHeaderValue decodes an Mcp-Name or Mcp-Param-* value: the
// =?base64?…?= sentinel form is decoded (UTF-8), a plain value is taken as
// is ("Value Encoding"). It reports false for control characters, bad
// Base64 or non-UTF-8. A plain non-ASCII value is tolerated (go-sdk
// v1.8.0 clients send names unencoded) and compared as is.
func DecodeHeaderValue(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if enc, ok = strings.CutSuffix(enc, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			if err != nil || !utf8.Valid(b) {
				return "", false
			}
			return string(b), true
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return "", false
		}
	}
	return v, true
}
