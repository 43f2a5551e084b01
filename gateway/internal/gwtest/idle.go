package gwtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// idleProxy is a TCP proxy that cuts a connection when the server side
// sends nothing for idle, as load balancers do.
type idleProxy struct {
	ln     net.Listener
	target string
	idle   time.Duration
	wg     sync.WaitGroup
}

func newIdleProxy(t *testing.T, target string, idle time.Duration) *idleProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &idleProxy{ln: ln, target: target, idle: idle}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *idleProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer c.Close()
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				return
			}
			defer s.Close()
			go func() { _, _ = io.Copy(s, c) }()
			buf := make([]byte, 32<<10)
			for {
				_ = s.SetReadDeadline(time.Now().Add(p.idle))
				n, err := s.Read(buf)
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return // idle too long, or the server closed
				}
			}
		}()
	}
}

// IdleProxyURL puts an idleProxy cutting after a second of silence in
// front of the gateway at gw (its …/mcp URL) and returns the proxy's /mcp URL.
func IdleProxyURL(t *testing.T, gw string) string {
	t.Helper()
	proxy := newIdleProxy(t, strings.TrimPrefix(strings.TrimSuffix(gw, "/mcp"), "http://"), time.Second)
	return "http://" + proxy.ln.Addr().String() + "/mcp"
}

// SlowCallsThroughIdleProxy opens a session of version through the idle
// proxy at via and calls slow for 1.6 s on it, without a progress token and
// with one: with keep-alive on (keep >= 0) each call must answer, and the
// one with a token must get progress for it; with it off (keep < 0) none
// may answer.
func SlowCallsThroughIdleProxy(t *testing.T, via, version string, keep time.Duration) {
	t.Helper()
	sid := initSession(t, via, version)
	for _, token := range []string{"", "tok-1"} {
		meta := ""
		if token != "" {
			meta = `,"_meta":{"progressToken":"` + token + `"}`
		}
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{"seconds":1.6,"text":"done"}` + meta + `}}`
		events, result, err := postStream(via, sid, version, body)
		if keep < 0 {
			if err == nil && result != "" {
				t.Fatalf("token %q: the call survived the idle timeout without keep-alive: %s", token, result)
			}
			continue
		}
		if err != nil || !strings.Contains(result, "slept 1.6 s") {
			t.Fatalf("token %q: %v, result %q, events %q", token, err, result, events)
		}
		if token != "" && !strings.Contains(strings.Join(events, "\n"), `"progressToken":"tok-1"`) {
			t.Errorf("events %q: want progress for the client's token", events)
		}
	}
}

// SlowModernCallVia is a 2026-07-28 client's 1.6 s slow call through the
// idle proxy at via (what names it in the failure); it must answer.
func SlowModernCallVia(t *testing.T, via, what string) {
	t.Helper()
	c := &ModernClient{T: t, URLs: []string{via}, NoExt: true}
	r := c.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 1.6, "text": "done"}})
	if r.Error != nil || !strings.Contains(string(r.Result), "slept 1.6 s") {
		t.Fatalf("%s through the idle proxy: %+v", what, r)
	}
}

// initSession opens a session of version on url and returns its id.
func initSession(t *testing.T, url, version string) string {
	t.Helper()
	resp := Post(t, url, "application/json", InitBody(version), http.Header{"Accept": {"application/json, text/event-stream"}})
	io.Copy(io.Discard, resp.Body)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: HTTP %d, no session", resp.StatusCode)
	}
	Post(t, url, "application/json", `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		http.Header{"Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {version}})
	return sid
}

// Post POSTs body with contentType (none when empty) and header; the
// answer's body is closed when the test ends.
func Post(t testing.TB, url, contentType, body string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vv := range header {
		req.Header[k] = vv
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// postStream posts body on session sid of version and reads the answer: every SSE
// data line or comment, and the JSON-RPC result (raw) once it came.
func postStream(url, sid, version, body string) (events []string, result string, err error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		return nil, resultOf(string(b)), err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		events = append(events, line)
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			if r := resultOf(data); r != "" {
				return events, r, nil
			}
		}
	}
	return events, "", fmt.Errorf("the stream ended without a result: %v", sc.Err())
}

// InitBody is an initialize request for protocol version.
func InitBody(version string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
}

// resultOf is the result of JSON-RPC message msg (raw), "" without one.
func resultOf(msg string) string {
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal([]byte(msg), &m) != nil {
		return ""
	}
	return string(m.Result)
}
