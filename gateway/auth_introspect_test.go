package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/upstream"
)

// introspectGateway is a Handler validating tokens with an introspection
// endpoint that answers "good" as active and any other token as the
// TypeScript SDK's demo authorization server does: HTTP 401 with
// {"active":false,...}. Its upstream answers every request.
func introspectGateway(t *testing.T, rate float64) *Handler {
	t.Helper()
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.PostFormValue("token") == "good" {
			fmt.Fprint(w, `{"active":true,"client_id":"app","scope":"mcp:tools"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"active":false,"error":"Unauthorized","error_description":"Invalid token: Error: Invalid or expired token"}`)
	}))
	t.Cleanup(as.Close)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
	}))
	t.Cleanup(up.Close)
	guard, err := auth.New(auth.Config{IntrospectionURL: as.URL + "/introspect", IntrospectionRate: rate})
	if err != nil {
		t.Fatal(err)
	}
	client, err := upstream.New(up.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Upstream: client, Auth: guard, PublicURL: authPublicURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// callFrom is a tools/list with token from the client at addr.
func callFrom(h http.Handler, addr, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(toolsList))
	r.RemoteAddr = addr + ":40000"
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestAuthForgedTokenDisturbsNoOne: a forged token, which the
// authorization server answers with 401 and active:false, gets 401
// invalid_token, and a valid token right after it passes. It used to get
// 503, and the valid token 503 too ("the introspection endpoint ...
// failed just now").
func TestAuthForgedTokenDisturbsNoOne(t *testing.T) {
	h := introspectGateway(t, -1)
	w := callFrom(h, "192.0.2.66", "forged")
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Header().Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("forged: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	if w := callFrom(h, "192.0.2.7", "good"); w.Code != http.StatusOK {
		t.Fatalf("a valid token right after the forged one: %d %s", w.Code, w.Body)
	}
}

// TestAuthRateLimited: a client address past its introspection burst
// gets 429 with Retry-After; another address, and the limited one's
// cached token, still pass.
func TestAuthRateLimited(t *testing.T) {
	h := introspectGateway(t, 1) // a burst of 4
	if w := callFrom(h, "192.0.2.66", "good"); w.Code != http.StatusOK {
		t.Fatalf("good: %d", w.Code)
	}
	for i := range 3 {
		if w := callFrom(h, "192.0.2.66", fmt.Sprint("forged-", i)); w.Code != http.StatusUnauthorized {
			t.Fatalf("forged %d: %d", i, w.Code)
		}
	}
	w := callFrom(h, "192.0.2.66", "forged-3")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), "Too Many Requests") {
		t.Fatalf("past the burst: %d, Retry-After %q, %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if w := callFrom(h, "192.0.2.66", "good"); w.Code != http.StatusOK {
		t.Fatalf("the limited address's cached token: %d", w.Code)
	}
	if w := callFrom(h, "192.0.2.7", "forged-3"); w.Code != http.StatusUnauthorized {
		t.Fatalf("another address: %d", w.Code)
	}
}
