package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestCancellation pins that a client's cancellation of a running tools/call
// reaches the upstream through the gateway: notifications/cancelled on a
// legacy session, the closed POST on a modern stateless server.
func TestCancellation(t *testing.T) {
	for _, sc := range []scenario{statefulLegacy, statelessModern} {
		for _, via := range vias {
			t.Run(sc.name+"/"+via, func(t *testing.T) {
				t.Parallel()
				rec := &testupstream.Recorder{}
				opts := sc.upstream
				opts.Recorder = rec
				gc := connectGo(t, endpoint(t, via, opts), sc.version, nil, false)

				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				callCtx, cancelCall := context.WithCancel(ctx)
				errc := make(chan error, 1)
				go func() {
					_, err := gc.CallTool(callCtx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": 60}})
					errc <- err
				}()
				if err := rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
					t.Fatal(err)
				}
				cancelCall()
				select {
				case err := <-errc:
					if err == nil {
						t.Fatal("cancelled call returned a result")
					}
				case <-ctx.Done():
					t.Fatal("cancelled call did not return")
				}
				if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
					t.Fatalf("upstream never saw the cancellation: %v", err)
				}

				// The session is still usable afterwards.
				if got, _ := gc.callText(t, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "after cancel"}}); got != "after cancel" {
					t.Errorf("echo after cancel = %q", got)
				}
			})
		}
	}
}
