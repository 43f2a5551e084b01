package front2025

// The rig of this package's tests: Fronts on the parts gateway.New gives
// them (internal/gwtest/frontrig), each served with the routing the
// Handler does for a session's requests (gateway/handler.go, serveMCP and
// route): the Front first, anything it does not serve relayed upstream.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

type (
	config    = frontrig.Config
	fleet     = frontrig.Fleet
	rpcReply  = gwtest.Reply
	mcpClient = gwtest.Client
)

var (
	rules       = gwtest.Rules
	rulesPolicy = gwtest.RulesPolicy
	reply       = gwtest.OneReply
)

// serveFront is one replica's Front behind the Handler's routing.
func serveFront(r *frontrig.Replica) (*Front, http.Handler) {
	f := New(r.Deps, r.Cfg.Store, r.Cfg.Anonymous)
	up := r.Deps.Up
	return f, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			msg, ok := frontrig.ReadPost(w, req)
			if !ok {
				return
			}
			if f.Serve(w, req, msg) {
				return
			}
			up.Forward(w, req, msg, f.UpstreamHeader(req), "")
			return
		}
		if f.ServeEmulatedSession(w, req) {
			return
		}
		var body io.Reader
		if req.ContentLength != 0 && req.Body != nil && req.Body != http.NoBody {
			body = req.Body
		}
		resp, err := up.Pass(req.Context(), req.Method, f.UpstreamHeader(req), body)
		if err != nil {
			up.FailHTTP(w, req, err)
			return
		}
		if f.StreamOrEnd(w, req, resp) {
			return
		}
		up.Relay(w, req, resp)
	})
}

func newFleet(t *testing.T, upstreamURL string) *fleet {
	return frontrig.NewFleet(t, upstreamURL, func(r *frontrig.Replica) http.Handler {
		_, h := serveFront(r)
		return h
	})
}

// replicas are Fronts sharing one miniredis, in front of one upstream
// (the Handler tests' newReplicas).
type replicas struct {
	fs    []*Front
	urls  []string
	mr    *miniredis.Miniredis
	store *taskstore.Store // a store of its own on the same Redis, for assertions
}

func newReplicas(t *testing.T, upstreamURL string, n int, rs policy.Rules) *replicas {
	t.Helper()
	rp := &replicas{}
	fl := frontrig.NewFleet(t, upstreamURL, func(r *frontrig.Replica) http.Handler {
		f, h := serveFront(r)
		rp.fs = append(rp.fs, f)
		return h
	})
	for i := 0; i < n; i++ {
		fl.Add(func(c *config) { c.Policy, c.PollLimit, c.ReplicaID = rulesPolicy(rs), 0, fmt.Sprintf("r%d", i) })
	}
	rp.urls, rp.mr = fl.URLs, fl.MR
	rdb := redis.NewClient(&redis.Options{Addr: fl.MR.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1})
	rp.store = taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { rdb.Close() })
	t.Cleanup(func() { rp.store.Close() })
	return rp
}

// The helpers below are the Handler tests' (gateway/session_test.go).

type spy struct {
	next http.Handler
	mu   sync.Mutex
	seen []spied
}

type spied struct {
	httpMethod, rpcMethod, version string
	body                           []byte
}

func (s *spy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &m)
	s.mu.Lock()
	s.seen = append(s.seen, spied{r.Method, m.Method, r.Header.Get("Mcp-Protocol-Version"), body})
	s.mu.Unlock()
	s.next.ServeHTTP(w, r)
}

func (s *spy) requests() []spied {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]spied(nil), s.seen...)
}

// rawPost sends one JSON-RPC message with the given session and version
// headers ("" leaves one out).
func rawPost(t *testing.T, url, sid, version, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// capture records the raw bodies of the answers to initialize requests.
type capture struct {
	mu    sync.Mutex
	inits []*bytes.Buffer
}

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
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

func (c *capture) initAnswer(t *testing.T) rpcReply {
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
	var m rpcReply
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("initialize answer %q: %v", raw, err)
	}
	return m
}

// connectSDK connects a go-sdk client asking for version through url.
func connectSDK(t *testing.T, url, version string) (*mcp.ClientSession, *capture) {
	t.Helper()
	cap := &capture{}
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

func echo(t *testing.T, cs *mcp.ClientSession, text string) {
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
