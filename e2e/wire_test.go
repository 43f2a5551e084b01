package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// wireRecorder is an http.RoundTripper that records every HTTP exchange a
// client makes, as the client sees it: method, path, the MCP-relevant
// headers, the JSON-RPC request body, the status, and the JSON-RPC messages
// of the response (a JSON body or each SSE event's data).
type wireRecorder struct {
	base http.RoundTripper

	mu        sync.Mutex
	exchanges []*exchange
}

// exchange is one recorded HTTP request and its response. Exchanges are
// ordered by when the request was sent.
type exchange struct {
	Method          string            `json:"method"`
	Path            string            `json:"path"`
	RequestHeaders  map[string]string `json:"requestHeaders,omitempty"`
	Request         any               `json:"request,omitempty"`
	Status          int               `json:"status"`
	ResponseHeaders map[string]string `json:"responseHeaders,omitempty"`
	// Response is the parsed JSON body, or for text/event-stream the list
	// of events (see sseEvent), or the raw text of any other body.
	Response any    `json:"response,omitempty"`
	Error    string `json:"error,omitempty"`

	contentType string
	body        bytes.Buffer // response bytes the client has read so far
}

// sseEvent is one server-sent event; Data is parsed JSON when it is JSON.
type sseEvent struct {
	ID    string `json:"id,omitempty"`
	Event string `json:"event,omitempty"`
	Data  any    `json:"data,omitempty"`
	Retry string `json:"retry,omitempty"`
}

func newWireRecorder() *wireRecorder {
	return &wireRecorder{base: http.DefaultTransport}
}

// client returns an HTTP client whose traffic is recorded.
func (w *wireRecorder) client() *http.Client { return &http.Client{Transport: w} }

// Request headers worth comparing: what the client sends that the proxy
// must carry. Response headers: everything MCP-defined plus Content-Type
// and Allow. Hop-by-hop and incidental headers (Date, Content-Length,
// Transfer-Encoding) are left out.
func keptHeader(name string, response bool) bool {
	name = http.CanonicalHeaderKey(name)
	if strings.HasPrefix(name, "Mcp-") || name == "Content-Type" {
		return true
	}
	if response {
		return name == "Allow"
	}
	return name == "Accept" || name == "Last-Event-Id"
}

func keptHeaders(h http.Header, response bool) map[string]string {
	m := map[string]string{}
	for k, vs := range h {
		if keptHeader(k, response) {
			m[http.CanonicalHeaderKey(k)] = strings.Join(vs, ", ")
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func (w *wireRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := &exchange{
		Method:         req.Method,
		Path:           req.URL.Path,
		RequestHeaders: keptHeaders(req.Header, false),
	}
	if req.Body != nil && req.Body != http.NoBody {
		data, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		ex.Request = parseJSONOrText(data)
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(data))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	}
	w.mu.Lock()
	w.exchanges = append(w.exchanges, ex)
	w.mu.Unlock()

	resp, err := w.base.RoundTrip(req)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		ex.Error = err.Error()
		return nil, err
	}
	ex.Status = resp.StatusCode
	ex.ResponseHeaders = keptHeaders(resp.Header, true)
	ex.contentType = resp.Header.Get("Content-Type")
	resp.Body = &recordingBody{ReadCloser: resp.Body, w: w, ex: ex}
	return resp, nil
}

// recordingBody copies what the client reads into the exchange. Bytes are
// captured in Read, before the client sees them, so once the client has acted
// on a message the recorder holds it.
type recordingBody struct {
	io.ReadCloser
	w  *wireRecorder
	ex *exchange
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.mu.Lock()
		b.ex.body.Write(p[:n])
		b.w.mu.Unlock()
	}
	return n, err
}

// snapshot returns the exchanges recorded so far with their responses
// parsed, as a JSON-able value.
func (w *wireRecorder) snapshot() []exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]exchange, 0, len(w.exchanges))
	for _, ex := range w.exchanges {
		c := exchange{
			Method: ex.Method, Path: ex.Path, RequestHeaders: ex.RequestHeaders, Request: ex.Request,
			Status: ex.Status, ResponseHeaders: ex.ResponseHeaders, Error: ex.Error,
		}
		if ex.body.Len() > 0 {
			if strings.HasPrefix(ex.contentType, "text/event-stream") {
				c.Response = parseSSE(ex.body.Bytes())
			} else {
				c.Response = parseJSONOrText(ex.body.Bytes())
			}
		}
		out = append(out, c)
	}
	return out
}

func parseJSONOrText(data []byte) any {
	var v any
	if err := json.Unmarshal(data, &v); err == nil {
		return v
	}
	return string(data)
}

// parseSSE splits a text/event-stream body into events (per the HTML
// server-sent events format: fields up to a blank line; data lines joined
// with "\n"). A trailing event without its blank line is kept, marked.
func parseSSE(data []byte) []sseEvent {
	var (
		events []sseEvent
		cur    sseEvent
		datas  []string
		any_   bool
	)
	flush := func() {
		if !any_ {
			return
		}
		if len(datas) > 0 {
			cur.Data = parseJSONOrText([]byte(strings.Join(datas, "\n")))
		}
		events = append(events, cur)
		cur, datas, any_ = sseEvent{}, nil, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		any_ = true
		switch field {
		case "id":
			cur.ID = value
		case "event":
			cur.Event = value
		case "data":
			datas = append(datas, value)
		case "retry":
			cur.Retry = value
		case "": // comment line
			cur.Event += fmt.Sprintf("(comment %q)", value)
		}
	}
	if any_ {
		cur.Event += "(unterminated)"
		flush()
	}
	return events
}

// normalize replaces what legitimately differs between runs — session ids,
// which are random — with stable placeholders ("session-1", ...), in order of
// first appearance, in headers and anywhere in the bodies.
func normalize(exs []exchange) []exchange {
	ids := map[string]string{}
	for _, ex := range exs {
		for _, h := range []map[string]string{ex.ResponseHeaders, ex.RequestHeaders} {
			if sid, ok := h["Mcp-Session-Id"]; ok && ids[sid] == "" {
				ids[sid] = fmt.Sprintf("session-%d", len(ids)+1)
			}
		}
	}
	var walk func(any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			if r, ok := ids[v]; ok {
				return r
			}
			return v
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
		case map[string]any:
			for k := range v {
				v[k] = walk(v[k])
			}
		case []sseEvent:
			for i := range v {
				v[i].Data = walk(v[i].Data)
			}
		}
		return v
	}
	for i := range exs {
		for _, h := range []map[string]string{exs[i].RequestHeaders, exs[i].ResponseHeaders} {
			if sid, ok := h["Mcp-Session-Id"]; ok {
				h["Mcp-Session-Id"] = ids[sid]
			}
		}
		exs[i].Request = walk(exs[i].Request)
		exs[i].Response = walk(exs[i].Response)
	}
	return exs
}
