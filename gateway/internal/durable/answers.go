package durable

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Answers are not asked twice: the client's answer to an input request is
// kept under the digest of the question (its method and params), and a
// rerun that asks an identical question gets the same answer without the
// client being asked. Identical means the same method and the same params
// as JSON values: the order of members and the spacing do not count, every
// value does (a changed message or schema is a new question).

// Digest names the question method params: a hash of the method and the
// params in canonical form (members sorted, no spacing, numbers as
// written).
func Digest(method string, params json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write(canonical(params))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// canonical re-encodes raw with sorted members; raw itself when it is not
// JSON (then only the very same bytes match).
func canonical(raw json.RawMessage) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("null")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return raw
	}
	return b
}

// Replay returns the recorded answer to the question method params, if
// answered holds one (taskstore.Task.Answered, by Digest).
func Replay(answered map[string]json.RawMessage, method string, params json.RawMessage) (json.RawMessage, bool) {
	if len(answered) == 0 {
		return nil, false
	}
	a, ok := answered[Digest(method, params)]
	return a, ok
}
