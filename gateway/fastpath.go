package gateway

// Hot-path helpers for polling (tasks/get): a modern request's params are
// decoded once and shared by isModern, validateModern and serveModernTasks
// (they used to decode them three times), and a result the gateway
// marshalled itself is framed as a JSON-RPC response without being
// validated and compacted a second time. Both are byte-for-byte what the
// slower paths produce (fastpath_test.go).

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// modernParams is what validateModern reads from params. InputResponses is
// only noted (RawMessage accepts any value, so it cannot fail the decode):
// serveModernTasks takes its fast path only when it is absent.
type modernParams struct {
	Meta           map[string]json.RawMessage `json:"_meta"`
	Name           *string                    `json:"name"`
	URI            *string                    `json:"uri"`
	TaskID         *string                    `json:"taskId"`
	InputResponses json.RawMessage            `json:"inputResponses"`
}

// paramsCache is a message's params decoded as modernParams, once.
type paramsCache struct {
	done bool
	src  []byte // the params decoded: a change of msg.Params invalidates
	p    modernParams
	err  error
}

// modernParams decodes msg.Params as modernParams (the zero value when
// params are absent or null, as validateModern treats them), once per
// message.
func (m *message) modernParams() (*modernParams, error) {
	c := &m.pcache
	if c.done && sameBytes(c.src, m.Params) {
		return &c.p, c.err
	}
	*c = paramsCache{done: true, src: m.Params}
	if len(m.Params) > 0 && string(m.Params) != "null" {
		c.err = json.Unmarshal(m.Params, &c.p)
	}
	return &c.p, c.err
}

// requestMeta is requestMeta(m.Params) from the shared decode: a clean
// decode has the same _meta; after any error the slow path answers, so
// malformed params are judged exactly as before.
func (m *message) requestMeta() map[string]json.RawMessage {
	p, err := m.modernParams()
	if err != nil || len(m.Params) == 0 || string(m.Params) == "null" {
		return requestMeta(m.Params)
	}
	return p.Meta
}

func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// plainID reports whether id is a JSON-RPC id that json.Marshal would
// write back unchanged: a number, or a string of printable ASCII without
// escapes or characters HTML-escaped (<, >, &).
func plainID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	if c := id[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
		return false
	}
	for _, c := range id {
		if c <= ' ' || c >= 0x7f || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// writeMarshalled answers with result as the JSON-RPC result of id, for a
// result that json.Marshal produced (compact, valid, HTML-escaped): the
// bytes are those writeJSON(w, 200, rpcResponse{…}) writes, without
// marshalling result again. Other ids take that path itself.
func writeMarshalled(w http.ResponseWriter, id json.RawMessage, result []byte) {
	if !plainID(id) {
		writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: id, Result: result})
		return
	}
	body := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(result))
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = append(body, id...)
	body = append(body, `,"result":`...)
	body = append(body, result...)
	body = append(body, '}')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
