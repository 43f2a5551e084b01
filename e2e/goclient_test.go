package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// scenario is one kind of upstream and one kind of client.
type scenario struct {
	name     string
	upstream testupstream.Options
	// version is the client's ClientSessionOptions.ProtocolVersion; "" is
	// the go-sdk default (2026-07-28: server/discover first, initialize as
	// fallback).
	version     string
	wantVersion string
}

var (
	statefulLegacy = scenario{"stateful-legacy", testupstream.Options{}, "2025-11-25", "2025-11-25"}
	// A 2026-07-28 client meets a session server: server/discover answers
	// with only legacy supportedVersions, and the client falls back to
	// initialize at 2025-11-25.
	statefulFallback = scenario{"stateful-default-client", testupstream.Options{}, "", "2025-11-25"}
	statelessModern  = scenario{"stateless-modern", testupstream.Options{Stateless: true}, "", "2026-07-28"}
	statefulJSON     = scenario{"stateful-json-legacy", testupstream.Options{JSONResponse: true}, "2025-11-25", "2025-11-25"}
)

// via returns the scenario as seen through via. The gateway serves
// 2026-07-28 in front of any upstream, so the go-sdk default client stays
// modern through it even when the upstream is a legacy session server (the
// gateway holds the upstream session and bridges input requests into MRTR
// rounds); directly, it falls back to 2025-11-25.
func (sc scenario) via(via string) scenario {
	if via == "gateway" && sc.version == "" {
		sc.wantVersion = "2026-07-28"
	}
	return sc
}

// sessionless reports whether the client ends up without an MCP session
// (and so sends no DELETE).
func (sc scenario) sessionless() bool {
	return sc.upstream.Stateless || sc.wantVersion >= "2026-07-28"
}

// goClient is a go-sdk client with handlers for every server→client
// request, counting what it was asked.
type goClient struct {
	*mcp.ClientSession

	mu            sync.Mutex
	elicitations  []string // messages
	samplePrompts []string
	rootsRequests int
	progress      atomic.Int32
}

const (
	goName = "Ada Lovelace"
	root1  = "file:///e2e/one"
	root2  = "file:///e2e/two"
)

// connectGo connects a go-sdk client to url over hc. standaloneSSE opens the
// GET stream (needed when the server sends requests outside a POST stream,
// as a JSON-response server does).
func connectGo(t *testing.T, url, version string, hc *http.Client, standaloneSSE bool) *goClient {
	t.Helper()
	gc := &goClient{}
	client := mcp.NewClient(&mcp.Implementation{Name: "taskgate-e2e-go", Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			gc.mu.Lock()
			gc.elicitations = append(gc.elicitations, req.Params.Message)
			gc.mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": goName}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			var prompt string
			if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
				prompt = tc.Text
			}
			gc.mu.Lock()
			gc.samplePrompts = append(gc.samplePrompts, prompt)
			gc.mu.Unlock()
			return &mcp.CreateMessageResult{Model: "e2e-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled: " + prompt}}, nil
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			gc.progress.Add(1)
		},
	})
	client.AddRoots(&mcp.Root{URI: root1, Name: "one"}, &mcp.Root{URI: root2})
	// Count roots/list requests (the SDK answers them itself, from AddRoots).
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "roots/list" {
				gc.mu.Lock()
				gc.rootsRequests++
				gc.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	transport := &mcp.StreamableClientTransport{
		Endpoint:             url,
		HTTPClient:           hc,
		MaxRetries:           -1, // a dropped stream is a failure here, not something to hide
		DisableStandaloneSSE: !standaloneSSE,
	}
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	gc.ClientSession = cs
	t.Cleanup(func() { cs.Close() })
	return gc
}

// callText calls a tool and returns its single text block and isError.
func (gc *goClient) callText(t *testing.T, params *mcp.CallToolParams) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := gc.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("tools/call %s: %v", params.Name, err)
	}
	var parts []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("tools/call %s: content %T, want text", params.Name, c)
		}
		parts = append(parts, tc.Text)
	}
	return strings.Join(parts, ""), res.IsError
}

// waitProgress waits (bounded) for n progress notifications: the client
// handles notifications asynchronously, so they may land just after the
// result.
func (gc *goClient) waitProgress(n int32) int32 {
	for deadline := time.Now().Add(3 * time.Second); gc.progress.Load() < n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return gc.progress.Load()
}

// exercise runs the whole tool set against gc and asserts real outcomes.
func exercise(t *testing.T, gc *goClient, sc scenario, slowSeconds float64) {
	t.Helper()
	if got := gc.InitializeResult().ProtocolVersion; got != sc.wantVersion {
		t.Errorf("negotiated protocol version = %q, want %q", got, sc.wantVersion)
	}
	if si := gc.InitializeResult().ServerInfo; si == nil || si.Name != testupstream.Implementation.Name {
		t.Errorf("serverInfo = %+v, want name %q", si, testupstream.Implementation.Name)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tools, err := gc.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"echo", "elicit", "fail", "progress", "roots", "rpcerror", "sample", "slow"}; !slices.Equal(names, want) {
		t.Errorf("tools/list names = %v, want %v", names, want)
	}

	check := func(params *mcp.CallToolParams, want string, wantIsError bool) {
		t.Helper()
		got, isErr := gc.callText(t, params)
		if got != want || isErr != wantIsError {
			t.Errorf("tools/call %s = %q (isError %t), want %q (isError %t)", params.Name, got, isErr, want, wantIsError)
		}
	}
	check(&mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "héllo, wörld ✓"}}, "héllo, wörld ✓", false)

	start := time.Now()
	check(&mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": slowSeconds, "text": "e2e"}},
		fmt.Sprintf("slept %g s: e2e", slowSeconds), false)
	if d := time.Since(start); d < time.Duration(slowSeconds*float64(time.Second)) {
		t.Errorf("slow returned after %v, before it slept %g s", d, slowSeconds)
	}

	check(&mcp.CallToolParams{Name: "elicit"}, "Hello, "+goName+"!", false)
	gc.mu.Lock()
	if want := []string{"What is your name?"}; !slices.Equal(gc.elicitations, want) {
		t.Errorf("elicitation requests seen = %q, want %q", gc.elicitations, want)
	}
	gc.mu.Unlock()

	p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 5, "delayMs": 5}}
	p.SetProgressToken("e2e-progress")
	check(p, "done 5", false)
	if got := gc.waitProgress(5); got != 5 && !sc.upstream.JSONResponse {
		t.Errorf("progress notifications = %d, want 5", got)
	} else if got > 5 {
		t.Errorf("progress notifications = %d, want at most 5", got)
	}

	check(&mcp.CallToolParams{Name: "sample", Arguments: map[string]any{"prompt": "write a haiku"}}, "sampled: write a haiku", false)
	check(&mcp.CallToolParams{Name: "roots"}, root1+","+root2, false)
	gc.mu.Lock()
	if !slices.Equal(gc.samplePrompts, []string{"write a haiku"}) {
		t.Errorf("sampling prompts = %q, want [write a haiku]", gc.samplePrompts)
	}
	// A modern client answers roots from the input_required result without
	// a roots/list request, so only legacy sessions see one.
	if legacy := sc.wantVersion < "2026-07-28"; legacy && gc.rootsRequests != 1 {
		t.Errorf("roots/list requests = %d, want 1", gc.rootsRequests)
	}
	gc.mu.Unlock()

	check(&mcp.CallToolParams{Name: "fail"}, testupstream.FailText, true)

	_, err = gc.CallTool(ctx, &mcp.CallToolParams{Name: "rpcerror"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Errorf("rpcerror: err = %v, want a JSON-RPC error", err)
	} else if werr.Code != testupstream.RPCErrorCode || werr.Message != testupstream.RPCErrorMessage || string(werr.Data) != `{"tool":"rpcerror"}` {
		t.Errorf("rpcerror: got code %d message %q data %s, want %d %q {\"tool\":\"rpcerror\"}",
			werr.Code, werr.Message, werr.Data, testupstream.RPCErrorCode, testupstream.RPCErrorMessage)
	}
	// The session must survive a JSON-RPC error.
	check(&mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}}, "still here", false)
}

// TestGoSDKClient drives every tool with the go-sdk client, directly and
// through the gateway, for each kind of upstream and client, and closes the
// session (DELETE for session servers).
func TestGoSDKClient(t *testing.T) {
	for _, sc := range []scenario{statefulLegacy, statefulFallback, statelessModern, statefulJSON} {
		for _, via := range vias {
			sc := sc.via(via)
			t.Run(sc.name+"/"+via, func(t *testing.T) {
				t.Parallel()
				url := endpoint(t, via, sc.upstream)
				rec := newWireRecorder()
				gc := connectGo(t, url, sc.version, rec.client(), sc.upstream.JSONResponse)
				exercise(t, gc, sc, testupstream.DefaultSlowSeconds)

				if err := gc.Close(); err != nil {
					t.Errorf("closing session: %v", err)
				}
				var deletes []exchange
				for _, ex := range rec.snapshot() {
					if ex.Method == http.MethodDelete {
						deletes = append(deletes, ex)
					}
				}
				switch {
				case sc.sessionless():
					if len(deletes) != 0 {
						t.Errorf("sessionless client sent %d DELETEs, want none", len(deletes))
					}
				case len(deletes) != 1:
					t.Errorf("closing sent %d DELETEs, want 1", len(deletes))
				case deletes[0].Status/100 != 2 || deletes[0].RequestHeaders["Mcp-Session-Id"] == "":
					t.Errorf("DELETE = %d with session %q, want 2xx with the session id",
						deletes[0].Status, deletes[0].RequestHeaders["Mcp-Session-Id"])
				}
			})
		}
	}
}
