package testupstream

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Implementation is the serverInfo the upstream reports.
var Implementation = mcp.Implementation{Name: "testupstream", Version: "1.0.0"}

// Options configures the upstream. The zero value is a stateful (legacy
// session) server answering with SSE streams.
type Options struct {
	// Stateless makes a modern 2026-07-28 sessionless server: no
	// Mcp-Session-Id, GET and DELETE answer 405, and tools ask for client
	// input with an "input_required" result instead of a server→client request.
	// Unset: a stateful server (2025-11-25 and older, sessions).
	Stateless bool
	// JSONResponse answers POSTs with application/json instead of
	// text/event-stream. Unset: SSE. Note that with JSON responses the
	// server cannot send progress notifications or legacy server→client
	// requests on the call's response.
	JSONResponse bool
	// Recorder, if set, records every tool call's start, end and cancellation.
	Recorder *Recorder
	// Logger receives the SDK's server logs. Unset: discarded.
	Logger *slog.Logger
	// SessionTimeout closes idle sessions after this long. Unset: never.
	SessionTimeout time.Duration
	// Elicit2 also registers the elicit2 tool, which asks two questions at
	// once. It is off by default so that the tool list every other test and
	// golden transcript pins stays as it is.
	Elicit2 bool
	// Conformance also registers the fixture tools of the conformance
	// suite's tasks scenarios (conformance.go).
	Conformance bool
	// NativeTasks (with Stateless) gives the upstream 2026-07-28 tasks of
	// its own, the tasks extension (nativetasks.go): NativeTaskTools run as
	// tasks for clients that declare it.
	NativeTasks bool
	// Notify adds the logging capability, a subscribable resource and the
	// log and touch tools (notify.go).
	Notify bool
	// ProtocolVersion is the newest protocol version this upstream speaks,
	// e.g. "2025-06-18" to emulate an older server: initialize negotiates at
	// most this version, and a request whose MCP-Protocol-Version header is
	// newer gets HTTP 400, as from a server that does not know it. Unset:
	// every version the go-sdk supports.
	ProtocolVersion string
	// ListChanged adds the grow tool (notify.go), which changes the tool
	// list: every session gets notifications/tools/list_changed.
	ListChanged bool
}

// protocolVersions is the go-sdk's supported versions (newest first) up to
// and including newest; nil (all of them) when newest is empty.
func protocolVersions(newest string) []string {
	if newest == "" {
		return nil
	}
	var vs []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v <= newest { // versions are dates: string order is age order
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		panic("testupstream: no supported protocol version is as old as " + newest)
	}
	return vs
}

// NewServer returns the MCP server with all tools registered. Most callers
// want [Handler].
func NewServer(opts Options) *mcp.Server {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	impl := Implementation
	so := &mcp.ServerOptions{
		Logger: logger,
		// No logging capability unless Notify: the other tools never log,
		// and an empty capability set keeps initialize results minimal and
		// stable.
		Capabilities:              &mcp.ServerCapabilities{},
		SupportedProtocolVersions: protocolVersions(opts.ProtocolVersion),
	}
	if opts.Notify {
		notifyOptions(so)
	}
	s := mcp.NewServer(&impl, so)
	addTools(s, opts.Recorder)
	if opts.Notify {
		addNotify(s, opts.Recorder)
	}
	if opts.ListChanged {
		addGrow(s, opts.Recorder)
	}
	if opts.Conformance {
		addConformance(s, opts.Recorder)
	}
	if opts.Elicit2 {
		add(s, opts.Recorder, &mcp.Tool{Name: "elicit2", Description: "Asks for a name and a colour at once (two elicitations)."}, elicit2)
	}
	return s
}

// Path is where Mux serves MCP.
const Path = "/mcp"

// Mux serves Handler at Path only (404 elsewhere), as the testupstream
// command does: an upstream URL without /mcp then fails as a real
// server's does.
func Mux(opts Options) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(Path, Handler(opts))
	return mux
}

// Handler returns the Streamable HTTP handler of a fresh upstream. It serves
// MCP on every path; mount it where you like (the testupstream command uses
// /mcp).
//
// Localhost DNS-rebinding protection stays on: a faithful proxy forwards with
// the upstream's own Host, so it never trips it.
func Handler(opts Options) http.Handler {
	s := NewServer(opts)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Stateless:      opts.Stateless,
		JSONResponse:   opts.JSONResponse,
		Logger:         opts.Logger,
		SessionTimeout: opts.SessionTimeout,
		// For 2026-07-28 requests the POST is the whole request: a client (or
		// gateway) that goes away cancels the tool, which the Recorder sees.
		PropagateRequestCancellation: true,
	})
	if opts.NativeTasks && opts.Stateless {
		return withNativeTasks(h)
	}
	return h
}
