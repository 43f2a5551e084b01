package stdio

import (
	"encoding/json"
	"strings"
	"testing"
)

// scan feeds line to a members scanner in chunks of n bytes.
func scan(line []byte, n int) *members {
	var m members
	for len(line) > 0 {
		k := min(n, len(line))
		m.feed(line[:k])
		line = line[k:]
	}
	return &m
}

func TestMembers(t *testing.T) {
	cases := []struct {
		line           string
		id             string
		method, result bool
	}{
		{`{"jsonrpc":"2.0","id":"taskgate-stdio-5","result":{"content":[]}}`, `"taskgate-stdio-5"`, false, true},
		// The TypeScript SDK writes the id last.
		{`{"result":{"id":"inner","text":"a \"id\": 3 } ,"},"jsonrpc":"2.0","id":12}`, `12`, false, true},
		{`{ "id" : "a\"b" , "method":"roots/list"}`, `"a\"b"`, true, false},
		{`{"method":"notifications/progress","params":{"id":4}}`, ``, true, false},
		{`{"error":{"code":-1,"message":"x"},"id":null}`, `null`, false, false},
		{`{"jsonrpc":"2.0","result":{"a":[1,{"id":2}]},"id":-3.5e2}`, `-3.5e2`, false, true},
	}
	for _, c := range cases {
		for _, n := range []int{1, 3, 7, 1 << 20} {
			m := scan([]byte(c.line), n)
			if got := string(m.named()); got != c.id || m.method != c.method || m.result != c.result {
				t.Errorf("%s (chunks of %d): id %q method %t result %t", c.line, n, got, m.method, m.result)
			}
			if c.id != "" && c.line[m.idStart:m.idEnd] != c.id {
				t.Errorf("%s: offsets %d:%d hold %q", c.line, m.idStart, m.idEnd, c.line[m.idStart:m.idEnd])
			}
		}
	}
}

// FuzzMembers: on any JSON object, the scanner finds the top-level "id"
// encoding/json finds, at offsets that hold it, however the line is cut.
func FuzzMembers(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), 3)
	f.Add([]byte(`{"result":{"id":"x"},"id":"y"}`), 1)
	f.Add([]byte(`{"a":"\\\"","id" :  [1], "b":{"id":2}}`), 5)
	f.Add([]byte(`{"id":"\u0041","method":"m"}`), 2)
	f.Fuzz(func(t *testing.T, line []byte, n int) {
		var obj map[string]json.RawMessage
		if !json.Valid(line) || json.Unmarshal(line, &obj) != nil || obj == nil || strings.Contains(string(line), `\u00`) {
			return // JSON objects only; a key spelled with escapes ("i\u0064") is not read as one
		}
		if n <= 0 {
			n = 1
		}
		m := scan(line, n)
		want, ok := obj["id"]
		got := m.named()
		switch {
		case !ok && got != nil:
			t.Fatalf("%s: found id %q, there is none", line, got)
		case ok && len(want) < maxIDBytes && want[0] != '{' && want[0] != '[':
			if string(got) != string(want) {
				t.Fatalf("%s: id %q, want %q", line, got, want)
			}
			if string(line[m.idStart:m.idEnd]) != string(want) {
				t.Fatalf("%s: offsets hold %q", line, line[m.idStart:m.idEnd])
			}
		}
	})
}

// idLastServer answers like a TypeScript SDK server, the id after the
// result: a 2 MB answer, then the same cut short (malformed), then a small
// one.
const idLastServer = `read -r init
printf '%s\n' '{"jsonrpc":"2.0","id":"taskgate-stdio-initialize","result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"idlast","version":"1"}}}'
read -r initialized
big() { printf '{"result":{"content":[{"type":"text","text":"'; head -c 2000000 /dev/zero | tr '\0' x; printf '"}]},"jsonrpc":"2.0","id":"taskgate-stdio-%s"%s\n' "$1" "$2"; }
read -r first
big 1 '}'
read -r second
big 2 ''
read -r third
printf '%s\n' '{"jsonrpc":"2.0","id":"taskgate-stdio-3","result":{"content":[{"type":"text","text":"small"}]}}'
exec cat >/dev/null
`

// TestBridgeLargeAnswerIDLast: a large answer whose id comes last reaches
// its call with the client's id; a malformed one fails only its call.
func TestBridgeLargeAnswerIDLast(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) { o.Command = []string{"/bin/sh", "-c", idLastServer} })
	c := newClient(t, b)
	if got := c.tool(11, "any", nil); len(got) != 2000000 || strings.Trim(got, "x") != "" {
		t.Fatalf("the 2 MB answer: %d bytes %.40q", len(got), got)
	}
	if got := c.tool(12, "any", nil); !strings.Contains(got, "answer was dropped: it is not a complete JSON object") {
		t.Fatalf("the malformed answer: %.200q", got)
	}
	if got := c.tool(13, "any", nil); got != "small" {
		t.Fatalf("after it: %q", got)
	}
}
