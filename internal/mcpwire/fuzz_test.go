package mcpwire

import "testing"

// FuzzParseMessage: whatever a client POSTs, parsing never panics, and
// either yields a message of a known kind or one of the JSON-RPC error
// codes with a 4xx status and a message that says what is wrong.
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"1.0","id":1,"method":"x"}`,
		`{"jsonrpc":"2.0","id":{},"method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":7}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":5}`,
		``, `null`, `42`, `"s"`, `{`, "\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, e := Parse(body)
		if (m == nil) == (e == nil) {
			t.Fatalf("Parse(%q) = %v, %v: want exactly one", body, m, e)
		}
		if e != nil {
			switch e.Code {
			case CodeParseError, CodeInvalidRequest:
			default:
				t.Fatalf("unexpected code %d for %q", e.Code, body)
			}
			if e.Status < 400 || e.Status > 499 || e.Message == "" {
				t.Fatalf("error %+v for %q", e, body)
			}
			return
		}
		switch m.Kind {
		case KindRequest, KindNotification, KindResponse, KindBatch:
		default:
			t.Fatalf("unknown kind %d for %q", m.Kind, body)
		}
		if m.Kind == KindRequest && m.MethodName() == "" {
			t.Fatalf("request without method from %q", body)
		}
	})
}
