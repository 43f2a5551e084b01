package testupstream_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
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

// connect starts an upstream with opts and connects a go-sdk client that
// answers elicitation with name "Ada", samples "echo: <prompt>" and has two
// roots. progress counts progress notifications.
func connect(t *testing.T, opts testupstream.Options, version string, progress *atomic.Int32) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(testupstream.Handler(opts))
	t.Cleanup(srv.Close)

	client := mcp.NewClient(&mcp.Implementation{Name: "unit", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			prompt := req.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "echo: " + prompt}}, nil
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			if progress != nil {
				progress.Add(1)
			}
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///a"}, &mcp.Root{URI: "file:///b"})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("call %s: %v", params.Name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("call %s: %d content blocks, want 1", params.Name, len(res.Content))
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

func TestTools(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    testupstream.Options
		version string // "" = the SDK default (2026-07-28, with legacy fallback)
		wantVer string
	}{
		{"stateful legacy", testupstream.Options{}, "2025-11-25", "2025-11-25"},
		{"stateful default falls back", testupstream.Options{}, "", "2025-11-25"},
		{"stateful json legacy", testupstream.Options{JSONResponse: true}, "2025-11-25", "2025-11-25"},
		{"stateless modern", testupstream.Options{Stateless: true}, "", "2026-07-28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var progress atomic.Int32
			cs := connect(t, tc.opts, tc.version, &progress)
			if got := cs.InitializeResult().ProtocolVersion; got != tc.wantVer {
				t.Errorf("protocol version = %s, want %s", got, tc.wantVer)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			if got, want := strings.Join(names, ","), "echo,elicit,fail,progress,roots,rpcerror,sample,slow"; got != want {
				t.Errorf("tools = %s, want %s", got, want)
			}

			for _, c := range []struct {
				params  *mcp.CallToolParams
				want    string
				isError bool
			}{
				{&mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}, "hi", false},
				{&mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": 0.05, "text": "x"}}, "slept 0.05 s: x", false},
				{&mcp.CallToolParams{Name: "elicit"}, "Hello, Ada!", false},
				{&mcp.CallToolParams{Name: "sample", Arguments: map[string]any{"prompt": "p"}}, "echo: p", false},
				{&mcp.CallToolParams{Name: "roots"}, "file:///a,file:///b", false},
				{&mcp.CallToolParams{Name: "fail"}, testupstream.FailText, true},
			} {
				got, isErr := callText(t, cs, c.params)
				if got != c.want || isErr != c.isError {
					t.Errorf("%s = %q (isError %t), want %q (isError %t)", c.params.Name, got, isErr, c.want, c.isError)
				}
			}

			p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 4}}
			p.SetProgressToken("tok")
			if got, _ := callText(t, cs, p); got != "done 4" {
				t.Errorf("progress = %q, want %q", got, "done 4")
			}
			wantProgress := int32(4)
			if tc.opts.JSONResponse {
				// A JSON response cannot carry them; the SDK sends them on the
				// standalone GET stream instead, racing with the result.
				wantProgress = 0
			}
			// The client handles notifications asynchronously: they may land
			// just after the result.
			for deadline := time.Now().Add(2 * time.Second); progress.Load() < wantProgress && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if got := progress.Load(); got != wantProgress && !tc.opts.JSONResponse {
				t.Errorf("progress notifications = %d, want %d", got, wantProgress)
			}

			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "rpcerror"})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != testupstream.RPCErrorCode || werr.Message != testupstream.RPCErrorMessage {
				t.Errorf("rpcerror: err = %v, want JSON-RPC error %d %q", err, testupstream.RPCErrorCode, testupstream.RPCErrorMessage)
			}
		})
	}
}

// TestSlowCancellationRecorded pins that a cancelled call is visible to the
// Recorder, which later gateway tests rely on.
func TestSlowCancellationRecorded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    testupstream.Options
		version string
	}{
		{"stateful legacy", testupstream.Options{}, "2025-11-25"},
		{"stateless modern", testupstream.Options{Stateless: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &testupstream.Recorder{}
			tc.opts.Recorder = rec
			cs := connect(t, tc.opts, tc.version, nil)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			callCtx, cancelCall := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": 30}})
				errc <- err
			}()
			if err := rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
				t.Fatal(err)
			}
			cancelCall()
			if err := <-errc; err == nil {
				t.Fatal("cancelled call returned no error")
			}
			if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
				t.Fatal(err)
			}
			if n := rec.Count("slow", testupstream.Completed); n != 0 {
				t.Errorf("slow completed %d times after cancellation", n)
			}
		})
	}
}

func TestProtocolVersionCapsNegotiation(t *testing.T) {
	cs := connect(t, testupstream.Options{ProtocolVersion: "2025-06-18"}, "2025-11-25", nil)
	if got := cs.InitializeResult().ProtocolVersion; got != "2025-06-18" {
		t.Fatalf("negotiated %q, want 2025-06-18", got)
	}
	if text, _ := callText(t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "old"}}); text != "old" {
		t.Errorf("echo = %q", text)
	}
}

// TestElicit2 pins the elicit2 tool: a legacy client gets both questions as
// two elicitation/create requests outstanding at the same time; a modern
// client gets one input_required round with both, another round with just
// the one its retry left out, and the answers in the text once it has both.
func TestElicit2(t *testing.T) {
	t.Run("stateful legacy: two concurrent elicitations", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(testupstream.Handler(testupstream.Options{Elicit2: true}))
		t.Cleanup(srv.Close)
		both := make(chan struct{})
		var once sync.Once
		var mu sync.Mutex
		seen := map[string]int{}
		client := mcp.NewClient(&mcp.Implementation{Name: "unit", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				mu.Lock()
				seen[req.Params.Message]++
				if len(seen) == 2 {
					once.Do(func() { close(both) })
				}
				mu.Unlock()
				// Answer only once both questions are outstanding: a tool
				// that asked them one after the other would never get here.
				select {
				case <-both:
				case <-time.After(5 * time.Second):
					return nil, errors.New("the other question never came while this one was open")
				}
				switch req.Params.Message {
				case testupstream.Elicit2Questions["name"]:
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
				case testupstream.Elicit2Questions["color"]:
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "teal"}}, nil
				}
				return nil, fmt.Errorf("unexpected question %q", req.Params.Message)
			},
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		got, isErr := callText(t, cs, &mcp.CallToolParams{Name: "elicit2"})
		if want := testupstream.Elicit2Text("Ada", "teal"); got != want || isErr {
			t.Errorf("elicit2 = %q (isError %t), want %q", got, isErr, want)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 2 || seen[testupstream.Elicit2Questions["name"]] != 1 || seen[testupstream.Elicit2Questions["color"]] != 1 {
			t.Errorf("questions asked: %v, want each once", seen)
		}
	})

	t.Run("stateless modern: one round with both", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true, Elicit2: true}))
		t.Cleanup(srv.Close)
		client := mcp.NewClient(&mcp.Implementation{Name: "unit", Version: "1"}, &mcp.ClientOptions{
			MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, errors.New("unused") },
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		keysOf := func(m mcp.InputRequestMap) string {
			var ks []string
			for k, v := range m {
				ep, ok := v.(*mcp.ElicitParams)
				if !ok || ep.Message != testupstream.Elicit2Questions[k] {
					t.Errorf("input request %s = %#v, want the elicitation %q", k, v, testupstream.Elicit2Questions[k])
				}
				ks = append(ks, k)
			}
			slices.Sort(ks)
			return strings.Join(ks, ",")
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit2"})
		if err != nil {
			t.Fatal(err)
		}
		if !res.NeedsInput() || keysOf(res.InputRequests) != "color,name" || res.RequestState == "" {
			t.Fatalf("first round: needs input %t, requests %v, state %q; want both questions at once", res.NeedsInput(), res.InputRequests, res.RequestState)
		}
		state := res.RequestState
		name := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Lin"}}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit2", RequestState: state,
			InputResponses: mcp.InputResponseMap{"name": name}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.NeedsInput() || keysOf(res.InputRequests) != "color" {
			t.Fatalf("retry with one answer: needs input %t, requests %v; want just the colour", res.NeedsInput(), res.InputRequests)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit2", RequestState: res.RequestState,
			InputResponses: mcp.InputResponseMap{"name": name, "color": &mcp.ElicitResult{Action: "decline"}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.NeedsInput() || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != testupstream.Elicit2Text("Lin", "(decline)") {
			t.Errorf("retry with both answers = %+v, want %q", res.Content, testupstream.Elicit2Text("Lin", "(decline)"))
		}
	})

	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		cs := connect(t, testupstream.Options{}, "2025-11-25", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools.Tools {
			if tl.Name == "elicit2" {
				t.Error("elicit2 listed without Options.Elicit2")
			}
		}
	})
}
