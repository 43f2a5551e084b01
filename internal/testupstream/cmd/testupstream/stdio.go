package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// serveStdio serves the test tools over stdio, plus tools that break the
// stdio transport on purpose:
//
//	exit {code}      the process exits at once with code
//	garbage {}       writes a line that is not JSON-RPC to stdout, then answers "ok"
//	hugeline {bytes} writes one line of that many bytes to stdout, then answers "ok"
//	afterlog {text}  answers "ok", then (its call over) writes a log message of text
//	counter {}       a count kept by this process: 1, 2, 3…
//	pid {}           this process's id, to tell which process served a call
//	env {name}       the value of an environment variable, and the working directory
//	bigtext {bytes}  answers with a text of that many bytes (one long stdout line)
//	flood {lines}    writes that many lines to stderr, then answers "ok"
//	startroots {}    with rootsAtStart: the roots the client gave when asked
//	                 right after notifications/initialized (waits for them)
//
// and says "testupstream stdio ready" on stderr, then one line
// "testupstream-event TOOL KIND" per event of its Recorder.
//
// It speaks 2025-11-25 at most unless version says otherwise: a stdio
// child that answers server/discover at 2026-07-28 is served statelessly,
// and the stdio tests of sessions need a session server. With
// --protocol-version 2026-07-28 it is a dual-era server, as the go-sdk
// makes one by default.
func serveStdio(version string, rootsAtStart bool) error {
	if version == "" {
		version = "2025-11-25"
	}
	rec := &testupstream.Recorder{Echo: func(e testupstream.Event) {
		fmt.Fprintf(os.Stderr, "testupstream-event %s %s\n", e.Tool, e.Kind)
	}}
	s := testupstream.NewServer(testupstream.Options{ProtocolVersion: version, Recorder: rec, Elicit2: true})
	type exitIn struct {
		Code int `json:"code"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "exit", Description: "Exits the process."}, func(_ context.Context, _ *mcp.CallToolRequest, in exitIn) (*mcp.CallToolResult, any, error) {
		os.Exit(in.Code)
		return nil, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "garbage", Description: "Writes a non-JSON line to stdout."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		fmt.Fprintln(os.Stdout, "this is not JSON-RPC")
		return text("ok"), nil, nil
	})
	type hugeIn struct {
		Bytes int `json:"bytes"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "hugeline", Description: "Writes one very long line to stdout."}, func(_ context.Context, _ *mcp.CallToolRequest, in hugeIn) (*mcp.CallToolResult, any, error) {
		fmt.Fprintln(os.Stdout, `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`+strings.Repeat("x", in.Bytes)+`"}}`)
		return text("ok"), nil, nil
	})
	type afterIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "afterlog", Description: "Answers, then logs once its call is over."}, func(_ context.Context, _ *mcp.CallToolRequest, in afterIn) (*mcp.CallToolResult, any, error) {
		go func() {
			time.Sleep(100 * time.Millisecond)
			fmt.Fprintln(os.Stdout, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":`+strconv.Quote(in.Text)+`}}`)
		}()
		return text("ok"), nil, nil
	})
	var count atomic.Int64
	mcp.AddTool(s, &mcp.Tool{Name: "counter", Description: "Counts the calls this process served."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return text(fmt.Sprint(count.Add(1))), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The id of the process that serves the call."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return text(strconv.Itoa(os.Getpid())), nil, nil
	})
	type envIn struct {
		Name string `json:"name"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Reads an environment variable and the working directory."}, func(_ context.Context, _ *mcp.CallToolRequest, in envIn) (*mcp.CallToolResult, any, error) {
		wd, _ := os.Getwd()
		return text(os.Getenv(in.Name) + " " + wd), nil, nil
	})
	type bigIn struct {
		Bytes int `json:"bytes"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "bigtext", Description: "Answers with a long text."}, func(_ context.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
		return text(strings.Repeat("x", in.Bytes)), nil, nil
	})
	type floodIn struct {
		Lines int `json:"lines"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "flood", Description: "Writes many lines to stderr."}, func(_ context.Context, _ *mcp.CallToolRequest, in floodIn) (*mcp.CallToolResult, any, error) {
		line := []byte("testupstream flood line\n")
		for range in.Lines {
			_, _ = os.Stderr.Write(line)
		}
		return text("ok"), nil, nil
	})
	if rootsAtStart {
		// As @modelcontextprotocol/server-filesystem does: roots/list as
		// soon as the client said initialized, before any call.
		got := make(chan string, 1)
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				res, err := next(ctx, method, req)
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok && method == "notifications/initialized" {
					go func() {
						r, err := ss.ListRoots(context.Background(), &mcp.ListRootsParams{})
						if err != nil {
							got <- "error: " + err.Error()
							return
						}
						uris := make([]string, 0, len(r.Roots))
						for _, root := range r.Roots {
							uris = append(uris, root.URI)
						}
						got <- strings.Join(uris, ",")
					}()
				}
				return res, err
			}
		})
		mcp.AddTool(s, &mcp.Tool{Name: "startroots", Description: "The roots asked for at start."}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			select {
			case r := <-got:
				got <- r
				return text(r), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	}
	fmt.Fprintln(os.Stderr, "testupstream stdio ready")
	return s.Run(context.Background(), &mcp.StdioTransport{})
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
