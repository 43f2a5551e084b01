package gwtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Capture records the raw bodies of the answers to initialize requests.
type Capture struct {
	mu    sync.Mutex
	inits []*bytes.Buffer
}

func (c *Capture) RoundTrip(req *http.Request) (*http.Response, error) {
	var isInit bool
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(b))
		isInit = bytes.Contains(b, []byte(`"method":"initialize"`))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !isInit {
		return resp, err
	}
	buf := &bytes.Buffer{}
	c.mu.Lock()
	c.inits = append(c.inits, buf)
	c.mu.Unlock()
	resp.Body = struct {
		io.Reader
		io.Closer
	}{&lockedTee{r: resp.Body, w: buf, mu: &c.mu}, resp.Body}
	return resp, nil
}

type lockedTee struct {
	r  io.Reader
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedTee) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.mu.Lock()
	l.w.Write(p[:n])
	l.mu.Unlock()
	return n, err
}

// InitAnswer is the one initialize answer captured.
func (c *Capture) InitAnswer(t testing.TB) Reply {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.inits) != 1 {
		t.Fatalf("%d initialize answers captured, want 1", len(c.inits))
	}
	raw := c.inits[0].String()
	if i := strings.Index(raw, "data: "); i >= 0 { // SSE: the data line
		raw = strings.TrimSpace(strings.SplitN(raw[i+len("data: "):], "\n", 2)[0])
	}
	var m Reply
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("initialize answer %q: %v", raw, err)
	}
	return m
}

// ConnectSDK connects a go-sdk client asking for version through url.
func ConnectSDK(t testing.TB, url, version string) (*mcp.ClientSession, *Capture) {
	t.Helper()
	cap := &Capture{}
	client := mcp.NewClient(&mcp.Implementation{Name: "sdk", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: cap}},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cap
}

// Echo calls the echo tool with text and checks the answer.
func Echo(t testing.TB, cs *mcp.ClientSession, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != text || res.IsError {
		t.Fatalf("echo = %q (isError %v), want %q", got, res.IsError, text)
	}
}
