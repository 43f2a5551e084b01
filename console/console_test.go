package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/taskstore"
)

const token = "operator-token-0123456789"

// secrets are owners whose text must never reach a page: a session id, and
// the digest of a client's Authorization (its owner without validation).
var (
	sessionOwner = "session:SESSION-ID-must-not-show"
	authSum      = sha256.Sum256([]byte("Bearer client-credential"))
	authOwner    = "auth:" + hex.EncodeToString(authSum[:])
)

type fixture struct {
	t     testing.TB
	store *taskstore.Store
	rdb   *redis.Client
	srv   *httptest.Server
	con   *Console
}

func newFixture(t testing.TB, tok string, cfg func(*Config)) *fixture {
	t.Helper()
	return openFixture(t, taskstore.Options{}, Config{Token: tok, TraceURL: "https://traces.example/trace/{trace_id}"}, cfg)
}

// openFixture serves a console with c, then cfg, on a store with opts
// on a miniredis.
func openFixture(t testing.TB, opts taskstore.Options, c Config, cfg func(*Config)) *fixture {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	st := taskstore.New(rdb, opts)
	t.Cleanup(func() { st.Close() })
	c.Store = st
	if cfg != nil {
		cfg(&c)
	}
	con, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, store: st, rdb: rdb, srv: newServer(t, con), con: con}
}

func newServer(t testing.TB, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func (f *fixture) create(owner, tool string) *taskstore.Task {
	f.t.Helper()
	tk, err := f.store.Create(context.Background(), taskstore.NewTask{Owner: owner, Tool: tool, Protocol: taskstore.Protocol2026,
		Trace: "0123456789abcdef0123456789abcdef-0123456789abcdef-0000000000000000-01"})
	if err != nil {
		f.t.Fatal(err)
	}
	return tk
}

// do sends a request without following redirects, from the console's
// own origin; auth is an Authorization value or "".
func (f *fixture) do(method, path, auth string, form url.Values, cookies ...*http.Cookie) (*http.Response, string) {
	f.t.Helper()
	hdr := map[string]string{}
	if method != http.MethodGet {
		hdr["Origin"] = f.srv.URL // as a browser posts the console's own forms
	}
	if auth != "" {
		hdr["Authorization"] = auth
	}
	return f.send(method, path, hdr, form, cookies...)
}

func TestAccessControl(t *testing.T) {
	f := newFixture(t, token, nil)
	tk := f.create(authOwner, "slow")
	bearer := "Bearer " + token
	pages := []string{"/", "/tasks/" + tk.ID, "/tools", "/replicas", "/failures", "/deliveries"}
	for _, p := range pages {
		if resp, _ := f.do("GET", p, "", nil); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
			t.Errorf("GET %s without credentials = %d %s, want a redirect to /login", p, resp.StatusCode, resp.Header.Get("Location"))
		}
		if resp, _ := f.do("GET", p, "Bearer wrong", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token = %d, want 401", p, resp.StatusCode)
		}
		if resp, body := f.do("GET", p, bearer, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the token = %d %s", p, resp.StatusCode, body)
		}
	}
	// The login form: a wrong token is refused, the right one sets a
	// cookie that is not the token.
	if resp, _ := f.do("POST", "/login", "", url.Values{"token": {"nope"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong login = %d", resp.StatusCode)
	}
	resp, _ := f.do("POST", "/login", "", url.Values{"token": {token}, "next": {"//evil.example/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login = %d to %q, want 303 to / (never off the console)", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || strings.Contains(session.Value, token) {
		t.Fatalf("session cookie = %+v", session)
	}
	if resp, _ := f.do("GET", "/", "", nil, session); resp.StatusCode != http.StatusOK {
		t.Errorf("GET / with the cookie = %d", resp.StatusCode)
	}
	forged := &http.Cookie{Name: cookieName, Value: strings.Repeat("0", 64)}
	if resp, _ := f.do("GET", "/", "", nil, forged); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET / with a forged cookie = %d", resp.StatusCode)
	}
	// Cancel with the cookie needs the CSRF token.
	if resp, _ := f.do("POST", "/tasks/"+tk.ID+"/cancel", "", url.Values{}, session); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cancel without CSRF token = %d, want 403", resp.StatusCode)
	}
	if resp, _ := f.do("POST", "/tasks/"+tk.ID+"/cancel", "", url.Values{"csrf": {f.con.csrf}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("cancel with a CSRF token but no credentials = %d, want 401", resp.StatusCode)
	}
	if got, _ := f.store.Get(context.Background(), authOwner, tk.ID); got.Status != taskstore.StatusWorking {
		t.Fatalf("refused cancels changed the task: %s", got.Status)
	}
	// The task page carries the CSRF token its form needs.
	_, page := f.do("GET", "/tasks/"+tk.ID, "", nil, session)
	if !strings.Contains(page, `name="csrf" value="`+f.con.csrf+`"`) {
		t.Fatal("the task page has no CSRF token")
	}
	if resp, body := f.do("POST", "/tasks/"+tk.ID+"/cancel", "", url.Values{"csrf": {f.con.csrf}}, session); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel = %d %s", resp.StatusCode, body)
	}
	got, _ := f.store.Get(context.Background(), authOwner, tk.ID)
	if got.Status != taskstore.StatusCancelled || got.StatusMessage != CancelMessage || !got.CancelRequested {
		t.Errorf("after the operator's cancel: %s %q", got.Status, got.StatusMessage)
	}
	// Again: the task is terminal.
	if resp, _ := f.do("POST", "/tasks/"+tk.ID+"/cancel", bearer, url.Values{}); resp.StatusCode != http.StatusConflict {
		t.Errorf("second cancel = %d, want 409", resp.StatusCode)
	}
	// Bearer needs no CSRF token.
	other := f.create(sessionOwner, "slow")
	if resp, _ := f.do("POST", "/tasks/"+other.ID+"/cancel", bearer, url.Values{}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("cancel with Bearer = %d", resp.StatusCode)
	}
	if resp, _ := f.do("GET", "/tasks/00000000-0000-4000-8000-000000000000", bearer, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown task = %d", resp.StatusCode)
	}
	if resp, _ := f.do("GET", "/?cursor=bogus", bearer, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad cursor = %d", resp.StatusCode)
	}
	if resp, _ := f.do("GET", "/?status=bogus", bearer, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad status = %d", resp.StatusCode)
	}
	if resp, _ := f.do("POST", "/logout", "", nil, session); len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Errorf("logout did not clear the cookie: %v", resp.Cookies())
	}
}

func TestNoTokenOpenButCSRF(t *testing.T) {
	f := newFixture(t, "", nil)
	tk := f.create(sessionOwner, "slow")
	if resp, _ := f.do("GET", "/", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET / = %d", resp.StatusCode)
	}
	if resp, _ := f.do("POST", "/tasks/"+tk.ID+"/cancel", "", url.Values{"csrf": {"guess"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cancel with a wrong CSRF token = %d", resp.StatusCode)
	}
}

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:9000", "", true}, {"[::1]:9000", "", true}, {"localhost:9000", "", true},
		{"0.0.0.0:9000", "", false}, {":9000", "", false}, {"10.1.2.3:9000", "", false}, {"[::]:9000", "", false},
		{"0.0.0.0:9000", "t", true}, {"nonsense", "", false},
	} {
		if err := CheckListen(c.addr, c.token); (err == nil) != c.ok {
			t.Errorf("CheckListen(%q, %q) = %v", c.addr, c.token, err)
		}
	}
}

// TestNoOwnerRendered: no page shows a session id or a credential's
// digest; they show the owner's kind and short digest.
func TestNoOwnerRendered(t *testing.T) {
	f := newFixture(t, token, nil)
	ctx := context.Background()
	a := f.create(sessionOwner, "slow")
	b := f.create(authOwner, "slow")
	if err := f.store.Fail(ctx, authOwner, b.ID, taskstore.Outcome{Message: "boom"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/tasks/" + a.ID, "/tasks/" + b.ID + "?show=result", "/failures", "/?status=failed"} {
		_, body := f.do("GET", p, "Bearer "+token, nil)
		for _, secret := range []string{"SESSION-ID", hex.EncodeToString(authSum[:8]), "client-credential", token} {
			if strings.Contains(body, secret) {
				t.Errorf("GET %s shows %q", p, secret)
			}
		}
	}
	_, body := f.do("GET", "/", "Bearer "+token, nil)
	for _, want := range []string{OwnerLabel(sessionOwner), OwnerLabel(authOwner), a.ID, b.ID} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	if !strings.HasPrefix(OwnerLabel(sessionOwner), "session:") || !strings.HasPrefix(OwnerLabel(authOwner), "auth:") ||
		!strings.HasPrefix(OwnerLabel("anon:"+a.ID), "anonymous:") || !strings.HasPrefix(OwnerLabel("weird-owner"), "other:") {
		t.Error("owner kinds")
	}
}

// TestEscaping: hostile tool names, status messages and results are text.
func TestEscaping(t *testing.T) {
	const hostile = `<script>alert(1)</script><img src=x onerror=alert(2)>`
	f := newFixture(t, token, func(c *Config) {
		c.Tools = func(context.Context) ([]ToolRow, error) {
			return []ToolRow{{Tool: hostile, Reason: hostile}}, nil
		}
	})
	ctx := context.Background()
	tk := f.create(authOwner, hostile)
	// Raw, as an upstream may send it: JSON needs no escaping of '<'.
	result := json.RawMessage(`{"content":[{"type":"text","text":"</pre>` + strings.ReplaceAll(hostile, `"`, `\"`) + `"}]}`)
	if err := f.store.Fail(ctx, authOwner, tk.ID, taskstore.Outcome{Message: hostile, Result: result}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/?tool=" + url.QueryEscape(hostile), "/tasks/" + tk.ID, "/tasks/" + tk.ID + "?show=result", "/failures", "/tools"} {
		resp, body := f.do("GET", p, "Bearer "+token, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d", p, resp.StatusCode)
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, "<img") {
			t.Errorf("GET %s renders markup from data:\n%s", p, body)
		}
		if !strings.Contains(body, "&lt;script&gt;") {
			t.Errorf("GET %s does not show the hostile text escaped", p)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s CSP = %q", p, csp)
		}
	}
	// The result only behind "show".
	_, hidden := f.do("GET", "/tasks/"+tk.ID, "Bearer "+token, nil)
	_, shown := f.do("GET", "/tasks/"+tk.ID+"?show=result", "Bearer "+token, nil)
	if strings.Contains(hidden, "&lt;/pre&gt;") || !strings.Contains(shown, "&lt;/pre&gt;") {
		t.Error("the result is not behind show")
	}
	if !strings.Contains(hidden, `https://traces.example/trace/0123456789abcdef0123456789abcdef`) {
		t.Error("no trace link")
	}
}

func TestListPaging(t *testing.T) {
	f := newFixture(t, "", nil)
	var ids []string
	for i := 0; i < 60; i++ {
		ids = append(ids, f.create(authOwner, "slow").ID)
	}
	seen := map[string]bool{}
	next := "/"
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatal("too many pages")
		}
		_, body := f.do("GET", next, "", nil)
		for _, id := range ids {
			if strings.Contains(body, "/tasks/"+id+`"`) {
				seen[id] = true
			}
		}
		next = ""
		if i := strings.Index(body, `rel="next"`); i >= 0 {
			j := strings.LastIndex(body[:i], `href="`)
			next = strings.ReplaceAll(body[j+6:i-2], "&amp;", "&")
		}
	}
	if len(seen) != len(ids) {
		t.Errorf("paging showed %d of %d tasks", len(seen), len(ids))
	}
	// Search by id opens the task.
	if resp, _ := f.do("GET", "/?id="+ids[3], "", nil); resp.Header.Get("Location") != "/tasks/"+ids[3] {
		t.Errorf("search by id = %s", resp.Header.Get("Location"))
	}
}

func TestReplicas(t *testing.T) {
	f := newFixture(t, "", nil)
	if err := f.store.PublishLatencies(context.Background(), "replica-<b>", map[string][]byte{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	_, body := f.do("GET", "/replicas", "", nil)
	if !strings.Contains(body, "replica-&lt;b&gt;") {
		t.Errorf("replicas page:\n%s", body)
	}
}

func TestStoreDown(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	defer rdb.Close()
	st := taskstore.New(rdb, taskstore.Options{})
	defer st.Close()
	con, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	w := httptest.NewRecorder()
	con.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:9090/", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("GET / with Redis down = %d", w.Code)
	}
	if _, err := New(Config{Store: st, TraceURL: "javascript:alert(1)//{trace_id}"}); err == nil {
		t.Error("a javascript: trace URL was accepted")
	}
	if _, err := New(Config{}); !errors.Is(err, err) || err == nil {
		t.Error("no store accepted")
	}
}
