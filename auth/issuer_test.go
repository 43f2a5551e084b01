package auth

import (
	"testing"

	"github.com/taskgate/taskgate/internal/authtest"
)

// testAudience is the gateway's URL in these tests.
const testAudience = "https://gw.example/mcp"

// testGuard is a Guard for iss's tokens for testAudience.
func testGuard(t *testing.T, iss *authtest.Issuer, scopes ...string) *Guard {
	t.Helper()
	g, err := New(Config{Issuer: iss.URL, Audience: []string{testAudience}, RequiredScopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
