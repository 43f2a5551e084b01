package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

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
		m, e := mcpwire.Parse(body)
		if (m == nil) == (e == nil) {
			t.Fatalf("mcpwire.Parse(%q) = %v, %v: want exactly one", body, m, e)
		}
		if e != nil {
			switch e.Code {
			case mcpwire.CodeParseError, mcpwire.CodeInvalidRequest:
			default:
				t.Fatalf("unexpected code %d for %q", e.Code, body)
			}
			if e.Status < 400 || e.Status > 499 || e.Message == "" {
				t.Fatalf("error %+v for %q", e, body)
			}
			return
		}
		switch m.Kind {
		case mcpwire.KindRequest, mcpwire.KindNotification, mcpwire.KindResponse, mcpwire.KindBatch:
		default:
			t.Fatalf("unknown kind %d for %q", m.Kind, body)
		}
		if m.Kind == mcpwire.KindRequest && m.MethodName() == "" {
			t.Fatalf("request without method from %q", body)
		}
	})
}

// FuzzFront sends arbitrary bodies, with and without 2026-07-28 headers,
// through the whole handler: no panic, and every answer is either a
// JSON-RPC error object or what the (dead) upstream's absence implies.
func FuzzFront(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01"}}}`,
		`{"jsonrpc":"2.0","id":"taskgate-input:x:1","result":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":7}}`,
	} {
		f.Add([]byte(s), "2026-07-28", "tools/call", "x")
		f.Add([]byte(s), "", "", "")
	}
	up, _ := upstream.New("http://127.0.0.1:1/mcp", upstream.Options{})
	h, err := New(Config{Upstream: up, Store: newFuzzStore(f)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Close() })
	f.Fuzz(func(t *testing.T, body []byte, version, method, name string) {
		req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range map[string]string{"MCP-Protocol-Version": version, "Mcp-Method": method, "Mcp-Name": name} {
			if v != "" && !strings.ContainsAny(v, "\r\n\x00") {
				req.Header.Set(k, v)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusAccepted || rec.Body.Len() == 0 {
			return
		}
		var out struct {
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil && !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			t.Fatalf("answer is not JSON (HTTP %d): %q", rec.Code, rec.Body.Bytes())
		}
		if out.Error != nil && out.Error.Message == "" {
			t.Fatalf("error without a message: %s", rec.Body.Bytes())
		}
	})
}

// FuzzDecodeHeaderValue: the =?base64?…?= decoding of Mcp-Name and
// Mcp-Param-* never panics, and round-trips what the encoder produces.
func FuzzDecodeHeaderValue(f *testing.F) {
	for _, s := range []string{"us-west1", "=?base64?SGVsbG8=?=", "=?base64?", "=?base64?!!?=", " padded ", "Hello, 世界"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = core.DecodeHeaderValue(s)
		if !utf8.ValidString(s) {
			return // header values carry UTF-8 text; the decoder refuses the rest
		}
		enc := upstream.HeaderValue(s)
		got, ok := core.DecodeHeaderValue(enc)
		if !ok || got != s {
			t.Fatalf("round trip of %q: encoded %q, decoded %q (ok=%v)", s, enc, got, ok)
		}
	})
}

// newFuzzStore is a store on an in-process Redis, for fuzz targets.
func newFuzzStore(f *testing.F) *taskstore.Store {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		f.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	s := taskstore.New(rdb, taskstore.Options{})
	f.Cleanup(func() { s.Close(); rdb.Close(); mr.Close() })
	return s
}
