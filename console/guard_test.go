package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/taskstore"
)

// send sends a request with the headers in hdr ("Host" sets the Host)
// and the cookies, without following redirects. An event stream's body
// is not read (it would not end): only its status and headers count.
func (f *fixture) send(method, path string, hdr map[string]string, form url.Values, cookies ...*http.Cookie) (*http.Response, string) {
	f.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, f.srv.URL+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (f *fixture) port() string {
	u, _ := url.Parse(f.srv.URL)
	return u.Port()
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// TestRebindingRefused: without a token (a console on loopback), a page
// of rebind.attacker.example whose name now resolves to 127.0.0.1 gets
// 421 on every path, and never a task id or result; its cancel with the
// CSRF token scraped from the page is refused. The operator's own names
// keep working.
func TestRebindingRefused(t *testing.T) {
	f := newFixture(t, "", nil)
	ctx := context.Background()
	anon := f.create("anon:only-the-id", "slow")
	done := f.create(authOwner, "slow")
	if err := f.store.Complete(ctx, authOwner, done.ID, json.RawMessage(`{"content":[{"type":"text","text":"SECRET-RESULT"}]}`)); err != nil {
		t.Fatal(err)
	}
	evil := "rebind.attacker.example:" + f.port()
	paths := []string{"/", "/?status=working", "/tasks/" + anon.ID, "/tasks/" + done.ID + "?show=result", "/tools", "/replicas",
		"/failures", "/deliveries", "/static/console.css", "/static/live.js", "/login", "/login?next=/", "/live/tasks", "/live/tasks/" + anon.ID, "/nothing"}
	for _, p := range paths {
		resp, body := f.send("GET", p, map[string]string{"Host": evil}, nil)
		if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(body, "--console-host") {
			t.Errorf("GET %s as %s = %d %q, want 421 naming --console-host", p, evil, resp.StatusCode, body)
		}
		for _, secret := range []string{anon.ID, done.ID, "SECRET-RESULT"} {
			if strings.Contains(body, secret) {
				t.Errorf("GET %s as %s shows %s", p, evil, secret)
			}
		}
	}
	// The attacker scrapes the CSRF token (say, through the operator's
	// page) and posts the cancel from its own origin.
	_, page := f.send("GET", "/tasks/"+anon.ID, nil, nil)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the task page has no CSRF token:\n%s", page)
	}
	for _, hdr := range []map[string]string{
		{"Host": evil, "Origin": "http://" + evil},
		{"Host": evil},
		{"Origin": "http://" + evil},                // the attacker's page posting to 127.0.0.1
		{"Referer": "http://" + evil + "/"},         // no Origin, the attacker's Referer
		{"Origin": "null"},                          // a sandboxed frame
		{"Host": "127.0.0.1:" + f.port()},           // neither Origin nor Referer, no Bearer
		{"Origin": "http://127.0.0.1:1" + f.port()}, // another port: another origin
	} {
		resp, _ := f.send("POST", "/tasks/"+anon.ID+"/cancel", hdr, url.Values{"csrf": {m[1]}})
		if resp.StatusCode != http.StatusMisdirectedRequest && resp.StatusCode != http.StatusForbidden {
			t.Errorf("cancel with %v = %d, want 421 or 403", hdr, resp.StatusCode)
		}
	}
	if got, _ := f.store.Get(ctx, anon.Owner, anon.ID); got.Status != taskstore.StatusWorking {
		t.Fatalf("a refused cancel changed the task: %s", got.Status)
	}
	// The operator's own names, any port (an SSH tunnel's).
	for _, host := range []string{"127.0.0.1:" + f.port(), "localhost:" + f.port(), "LOCALHOST:8080", "[::1]:9090", "127.0.0.2", "10.1.2.3:9090", "[2001:db8::1]"} {
		if resp, body := f.send("GET", "/tasks/"+anon.ID, map[string]string{"Host": host}, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, anon.ID) {
			t.Errorf("GET the task as %s = %d", host, resp.StatusCode)
		}
	}
	own := "localhost:" + f.port()
	resp, _ := f.send("POST", "/tasks/"+anon.ID+"/cancel", map[string]string{"Host": own, "Origin": "http://" + own}, url.Values{"csrf": {m[1]}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the operator's cancel = %d, want 303", resp.StatusCode)
	}
	if got, _ := f.store.Get(ctx, anon.Owner, anon.ID); got.Status != taskstore.StatusCancelled {
		t.Errorf("after the operator's cancel: %s", got.Status)
	}
}

// TestOriginChecked: a change (cancel, login, logout) from another origin
// is refused whatever credential it carries; the console's own origin,
// by Origin or else Referer, is accepted, and Bearer without either.
func TestOriginChecked(t *testing.T) {
	f := newFixture(t, token, nil)
	ctx := context.Background()
	tk := f.create(sessionOwner, "slow")
	bearer := "Bearer " + token
	own := f.srv.URL
	evil := "http://evil.example"
	cancel := "/tasks/" + tk.ID + "/cancel"
	resp, _ := f.send("POST", "/login", map[string]string{"Origin": own}, url.Values{"token": {token}})
	cookie := ""
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		t.Fatalf("login from the console's origin = %d, no cookie", resp.StatusCode)
	}
	for _, hdr := range []map[string]string{
		{"Authorization": bearer, "Origin": evil},
		{"Authorization": bearer, "Origin": "null"},
		{"Authorization": bearer, "Referer": evil + "/page"},
		{"Cookie": cookie, "Origin": evil},
		{"Cookie": cookie},
		{"Cookie": cookie, "Origin": "https://" + strings.TrimPrefix(own, "http://") + ".evil.example"},
	} {
		if resp, _ := f.send("POST", cancel, hdr, url.Values{"csrf": {f.con.csrf}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("cancel with %v = %d, want 403", hdr, resp.StatusCode)
		}
	}
	if resp, _ := f.send("POST", "/login", map[string]string{"Origin": evil}, url.Values{"token": {token}}); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) > 0 {
		t.Errorf("login from another origin = %d %v, want 403 and no cookie", resp.StatusCode, resp.Cookies())
	}
	if resp, _ := f.send("POST", "/logout", map[string]string{"Origin": evil, "Cookie": cookie}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("logout from another origin = %d, want 403", resp.StatusCode)
	}
	if got, _ := f.store.Get(ctx, sessionOwner, tk.ID); got.Status != taskstore.StatusWorking {
		t.Fatalf("a refused cancel changed the task: %s", got.Status)
	}
	// Its own origin: by Referer (no Origin), then by Origin over https
	// (a proxy ending TLS in front), and Bearer alone (no browser).
	if resp, body := f.send("POST", cancel, map[string]string{"Cookie": cookie, "Referer": own + "/tasks/" + tk.ID}, url.Values{"csrf": {f.con.csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("cancel with the console's Referer = %d %s", resp.StatusCode, body)
	}
	other := f.create(sessionOwner, "slow")
	https := "https://" + strings.TrimPrefix(own, "http://")
	if resp, body := f.send("POST", "/tasks/"+other.ID+"/cancel", map[string]string{"Cookie": cookie, "Origin": https}, url.Values{"csrf": {f.con.csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("cancel from https://<its host> = %d %s", resp.StatusCode, body)
	}
	third := f.create(sessionOwner, "slow")
	if resp, body := f.send("POST", "/tasks/"+third.ID+"/cancel", map[string]string{"Authorization": bearer}, url.Values{}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("cancel with Bearer, no Origin = %d %s", resp.StatusCode, body)
	}
}

// TestNextStaysLocal: after login the console sends the operator only
// to a path of its own; whatever a browser would read as another host
// becomes "/".
func TestNextStaysLocal(t *testing.T) {
	f := newFixture(t, token, nil)
	for next, want := range map[string]string{
		"/tasks/abc?show=result":        "/tasks/abc?show=result",
		"/?status=failed&tool=a%20b":    "/?status=failed&tool=a%20b",
		"/failures":                     "/failures",
		"/\t/evil.example":              "/",
		"/\n/evil.example":              "/",
		"/\r/evil.example":              "/",
		"//evil.example":                "/",
		"/\\evil.example":               "/",
		"\\\\evil.example":              "/",
		"/%09/evil.example":             "/",
		"/%2F%2Fevil.example":           "/",
		"/%2f/evil.example":             "/",
		"/%5Cevil.example":              "/",
		"https:evil.example":            "/",
		"https://evil.example/":         "/",
		"http:/evil.example":            "/",
		"javascript:alert(1)":           "/",
		" //evil.example":               "/",
		"\x00//evil.example":            "/",
		"evil.example":                  "/",
		"":                              "/",
		"/é/x":                          "/",
		"/" + strings.Repeat("a", 2100): "/",
	} {
		resp, _ := f.send("POST", "/login", map[string]string{"Origin": f.srv.URL}, url.Values{"token": {token}, "next": {next}})
		if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || got != want {
			t.Errorf("login with next=%q = %d to %q, want %q", next, resp.StatusCode, got, want)
		}
		_, page := f.send("GET", "/login?next="+url.QueryEscape(next), nil, nil)
		if field := `name="next" value="` + strings.ReplaceAll(want, "&", "&amp;") + `"`; !strings.Contains(page, field) {
			t.Errorf("the login page for next=%q lacks %s", next, field)
		}
	}
}
