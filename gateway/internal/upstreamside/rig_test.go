package upstreamside

// The rig of this package's tests: Sides built as gateway.New builds
// them, on one Redis.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// newSides is n replicas' Sides in front of upstreamURL, each with its own
// store and client on one miniredis, the policy package's defaults.
func newSides(t *testing.T, upstreamURL string, n int) []*Side {
	t.Helper()
	mr := miniredis.RunT(t)
	var out []*Side
	for range n {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		store := taskstore.New(rdb, taskstore.Options{})
		t.Cleanup(func() { rdb.Close() })
		t.Cleanup(func() { store.Close() })
		client, err := upstream.New(upstreamURL, upstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		d := decide.NewDecider(policy.NewCurrent(&policy.Config{}), store, zerolog.Nop())
		out = append(out, New(client, store, d, DefaultKeepAlive, zerolog.Nop()))
	}
	return out
}

// relayOnly is a Handler without a store and with the policy package's
// defaults in front of upstreamURL, cut down to its upstream side: a
// Side, served as the Handler serves a request no front takes
// (gateway/handler.go, route): a POST forwarded, anything else passed
// and relayed. keepAlive is Config.KeepAlive's (zero: DefaultKeepAlive;
// negative: none). It returns the /mcp URL.
func relayOnly(t *testing.T, upstreamURL string, keepAlive time.Duration) string {
	t.Helper()
	if keepAlive == 0 {
		keepAlive = DefaultKeepAlive
	}
	client, err := upstream.New(upstreamURL, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u := New(client, nil, decide.NewDecider(policy.NewCurrent(&policy.Config{}), nil, zerolog.Nop()), keepAlive, zerolog.Nop())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			resp, err := u.Pass(r.Context(), r.Method, r.Header, r.Body)
			if err != nil {
				u.FailHTTP(w, r, err)
				return
			}
			u.Relay(w, r, resp)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		msg, perr := mcpwire.Parse(body)
		if perr != nil {
			mcpwire.WriteError(w, nil, perr)
			return
		}
		u.Forward(w, r, msg, r.Header, "")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}
