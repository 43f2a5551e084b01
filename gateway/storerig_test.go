package gateway

import (
	"net/http/httptest"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// storeRig is one gateway on a miniredis store (frontrig.MiniStore: its
// client with the given hooks, go-redis's own retries off) in front of a
// test upstream.
type storeRig struct {
	mr  *miniredis.Miniredis
	rec *testupstream.Recorder
	c   *gwtest.ModernClient
	h   *Handler
}

func newStoreRig(t *testing.T, stateless bool, so taskstore.Options, cfg Config, hooks ...redis.Hook) *storeRig {
	t.Helper()
	rig := &storeRig{rec: &testupstream.Recorder{}}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: stateless, Recorder: rig.rec}))
	t.Cleanup(up.Close)
	rig.mr = miniredis.RunT(t)
	store := frontrig.MiniStore(t, rig.mr, so, hooks...)
	client, err := upstream.New(up.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstream, cfg.Store, cfg.PollLimit = client, store, -1
	if rig.h, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rig.h.Close() })
	srv := httptest.NewServer(rig.h)
	t.Cleanup(srv.Close)
	rig.c = &gwtest.ModernClient{T: t, URLs: []string{srv.URL + "/mcp"}}
	return rig
}
