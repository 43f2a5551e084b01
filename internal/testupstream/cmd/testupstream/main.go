// Command testupstream runs the test MCP server (see package testupstream) as
// a process, for humans and for the benchmark program.
//
//	testupstream --listen 127.0.0.1:8081 [--stateless] [--json] [--protocol-version 2025-06-18]
//	testupstream --stdio [--protocol-version 2026-07-28]
//
// MCP Streamable HTTP is served at /mcp; with --stdio, MCP over stdin and
// stdout instead, with fault tools for the stdio bridge's tests (stdio.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testupstream:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8081", "address to listen on")
	stateless := flag.Bool("stateless", false, "serve a modern 2026-07-28 stateless server instead of a session server")
	jsonResp := flag.Bool("json", false, "answer POSTs with application/json instead of SSE")
	version := flag.String("protocol-version", "", "newest protocol version to speak, e.g. 2025-06-18 to emulate an older server (default: all the go-sdk knows; with --stdio, 2025-11-25)")
	verbose := flag.Bool("v", false, "log SDK server activity to stderr")
	conformance := flag.Bool("conformance", false, "also serve the conformance suite's tasks fixture tools (greet, slow_compute, failing_job, …)")
	nativeTasks := flag.Bool("native-tasks", false, "with -stateless: run some tools as tasks of the upstream's own (the 2026-07-28 tasks extension)")
	notify := flag.Bool("notify", false, "also serve logging, a subscribable resource (test://note) and the log and touch tools")
	stdio := flag.Bool("stdio", false, "serve MCP on stdin/stdout (newline-delimited JSON-RPC), with fault tools")
	flag.Parse()
	if *stdio {
		return serveStdio(*version)
	}

	opts := testupstream.Options{Stateless: *stateless, JSONResponse: *jsonResp, ProtocolVersion: *version, NativeTasks: *nativeTasks, Conformance: *conformance, Notify: *notify}
	if *verbose {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	mux := testupstream.Mux(opts)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	// The resolved address on stderr lets a parent that passed port 0 find us.
	fmt.Fprintf(os.Stderr, "testupstream: serving http://%s/mcp (stateless=%t json=%t)\n", ln.Addr(), *stateless, *jsonResp)

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
