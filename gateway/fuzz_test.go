package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

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
