package identity

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/upstream"
)

// TestDiscoveryCacheBounds: the cache holds at most discoveryEntries
// documents, and fetches again once one is stale.
func TestDiscoveryCacheBounds(t *testing.T) {
	own := gwtest.NewOwnServer(t)
	client, _ := upstream.New(own.Srv.URL+"/mcp", upstream.Options{})
	pub, _ := NewPublicURLs("", "/mcp", nil)
	m := NewOAuthMeta(client, pub, nil, "/mcp", 4<<20, zerolog.Nop()) // gateway.DefaultMaxBody
	now := time.Now()
	m.now = func() time.Time { return now }
	for i := 0; i < 3*discoveryEntries; i++ {
		r := httptest.NewRequest("GET", "/.well-known/oauth-authorization-server/t"+strconv.Itoa(i), nil)
		if _, err := m.fetch(r, r.URL.Path); err != nil {
			t.Fatal(err)
		}
		if len(m.docs) > discoveryEntries {
			t.Fatalf("%d documents cached", len(m.docs))
		}
	}
	r := httptest.NewRequest("GET", wellKnownServer, nil)
	m.fetch(r, wellKnownServer)
	m.fetch(r, wellKnownServer)
	if n := own.Fetches.Load(); n != 1 {
		t.Fatalf("%d fetches of one fresh document", n)
	}
	now = now.Add(discoveryTTL + time.Second)
	m.fetch(r, wellKnownServer)
	if n := own.Fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after the TTL, want 2", n)
	}
}

// FuzzResourceMetadataChallenge: any challenge an upstream sends is
// rewritten or left as it was, never broken: the result names the
// gateway's URL exactly where the input named resource_metadata.
func FuzzResourceMetadataChallenge(f *testing.F) {
	for _, s := range []string{`Bearer resource_metadata="http://up/.well-known/oauth-protected-resource"`,
		`Bearer error="invalid_token", resource_metadata=http://up/x, scope="a b"`,
		`Bearer realm="resource_metadata=\"x\""`, `Basic realm="x", Bearer resource_metadata="`, `resource_metadata =  "a\"b"`, ``} {
		f.Add(s)
	}
	const to = "https://gw.example/.well-known/oauth-protected-resource/mcp"
	f.Fuzz(func(t *testing.T, in string) {
		out, ok := withResourceMetadata(in, to)
		if !ok {
			if out != in {
				t.Fatalf("unchanged %q came back as %q", in, out)
			}
			return
		}
		if !strings.Contains(out, `"`+to+`"`) {
			t.Fatalf("%q rewritten to %q without the URL", in, out)
		}
		if again, _ := withResourceMetadata(out, to); again != out {
			t.Fatalf("not idempotent: %q then %q", out, again)
		}
	})
}
