package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/console"
	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestConsole runs two replicas on one redis-server, each with its
// console: a task created on A shows on B's console, without its owner's
// credential; the operator's cancel on B's console reaches the upstream
// call A holds, as a client's tasks/cancel does; the MCP port serves no
// console.
func TestConsole(t *testing.T) {
	t.Parallel()
	const token = "console-e2e-token"
	const credential = "Bearer console-e2e-client-credential"
	rec := &testupstream.Recorder{}
	up := newUpstream(t, testupstream.Options{Recorder: rec})
	redisURL := "redis://" + redistest.Start(t)
	var consoles []string
	var replicas []*gateway
	for range 2 {
		caddr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		args := append(slices.Clone(twoReplicaFlags), "--redis-url", redisURL,
			"--console-listen", caddr, "--console-token", token)
		replicas = append(replicas, startGateway(t, up, args...))
		consoles = append(consoles, "http://"+caddr)
	}
	a, b := replicas[0], replicas[1]
	mc := newMClient(t, []string{a.URL, b.URL}, credential, true)
	id := mc.createTask(replicaA, "slow", map[string]any{"seconds": 60, "text": "console"}).TaskID
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
		t.Fatal(err)
	}

	hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(base, path string, auth string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// B's console lists A's task, and its page.
	code, list := get(consoles[1], "/", "Bearer "+token)
	if code != http.StatusOK || !strings.Contains(list, id) || !strings.Contains(list, "slow") {
		t.Fatalf("B's console list = %d:\n%s", code, list)
	}
	code, page := get(consoles[1], "/tasks/"+id, "Bearer "+token)
	if code != http.StatusOK || !strings.Contains(page, "working") || !strings.Contains(page, "e2e-") {
		t.Fatalf("B's console task page = %d:\n%s", code, page)
	}
	for _, body := range []string{list, page} {
		if strings.Contains(body, "console-e2e-client-credential") || strings.Contains(body, token) {
			t.Fatal("the console shows a credential")
		}
	}
	if code, _ := get(consoles[1], "/", ""); code != http.StatusSeeOther {
		t.Errorf("console without the token = %d, want a redirect to its login", code)
	}

	// The MCP port serves no console, with or without the token.
	for _, path := range []string{"/", "/tasks/" + id, "/login", "/failures"} {
		if code, body := get(a.base, path, "Bearer "+token); code == http.StatusOK && strings.Contains(body, "taskgate console") {
			t.Errorf("the MCP port serves the console at %s", path)
		}
	}

	// The operator cancels on B; A's worker cancels the upstream call.
	req, _ := http.NewRequest(http.MethodPost, consoles[1]+"/tasks/"+id+"/cancel", strings.NewReader(url.Values{}.Encode()))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("console cancel = %d", resp.StatusCode)
	}
	if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
		t.Fatalf("the upstream never saw the operator's cancel: %v", err)
	}
	tk := mc.get(replicaA, id)
	if tk.Status != "cancelled" || tk.StatusMessage != console.CancelMessage {
		t.Errorf("the client sees %s %q after the operator's cancel", tk.Status, tk.StatusMessage)
	}
	if _, page := get(consoles[0], "/?status=cancelled", "Bearer "+token); !strings.Contains(page, id) {
		t.Error("A's console does not list the cancelled task")
	}
	// The task's timeline on A's console: created, then the operator's
	// cancel with its message.
	_, page = get(consoles[0], "/tasks/"+id, "Bearer "+token)
	created, cancelled := strings.Index(page, "Created (working)"), strings.Index(page, "Cancelled by the operator</strong>: "+console.CancelMessage)
	if created < 0 || cancelled < created {
		t.Errorf("A's console task timeline lacks the creation or the operator's cancel:\n%s", page)
	}
	// Each console lists both replicas with their heartbeat's figures.
	for i, base := range consoles {
		_, page := get(base, "/replicas", "Bearer "+token)
		for _, r := range replicas {
			if !strings.Contains(page, "e2e-"+strings.TrimPrefix(r.base, "http://")) {
				t.Errorf("console %d does not list replica %s:\n%s", i, r.base, page)
			}
		}
		if n := strings.Count(page, " / 1000</td>"); n != 2 {
			t.Errorf("console %d shows held calls against --max-inflight for %d replicas, want 2:\n%s", i, n, page)
		}
	}
}

// TestConsoleRecordsAuto: with --console-records auto (the default) a
// fleet without a console writes no console records; once a replica with
// a console starts, the others learn it from the store and index their
// new tasks, which that console then lists.
func TestConsoleRecordsAuto(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, testupstream.Options{})
	addr := redistest.Start(t)
	redisURL := "redis://" + addr
	a := startGateway(t, up, append(slices.Clone(twoReplicaFlags), "--redis-url", redisURL, "--latency-sync", "200ms")...)
	mc := newMClient(t, []string{a.URL}, "Bearer auto-client", true)
	before := mc.createTask(0, "slow", map[string]any{"seconds": 0, "text": "before"}).TaskID
	mc.waitTask(0, before, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	if keys, err := rdb.Keys(ctx, "*{ops}*").Result(); err != nil || len(keys) > 0 {
		t.Fatalf("a fleet without a console wrote console records: %v %v", keys, err)
	}
	if keys, err := rdb.Keys(ctx, "*:log").Result(); err != nil || len(keys) > 0 {
		t.Fatalf("a fleet without a console wrote timelines: %v %v", keys, err)
	}
	caddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	startGateway(t, up, append(slices.Clone(twoReplicaFlags), "--redis-url", redisURL, "--console-listen", caddr)...)
	hc := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		id := mc.createTask(0, "slow", map[string]any{"seconds": 0, "text": "after"}).TaskID
		resp, err := hc.Get("http://" + caddr + "/tasks/" + id)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			if !strings.Contains(string(body), "Created (working)") {
				t.Errorf("the task created after the console started has no timeline:\n%s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica A never indexed its tasks for the console: last answer %d", resp.StatusCode)
		}
		time.Sleep(200 * time.Millisecond) // A looks every --latency-sync
	}
}

// TestConsoleRebinding runs a console without a token (on loopback, so
// allowed) against a DNS-rebinding page: with Host rebind.attacker.example
// every page, static file, the login form and both event streams answer
// 421 and never show a task id or result (an anonymous task's id is its
// only credential); a cancel with the CSRF token scraped from the
// operator's page is refused, as the attacker's Host and as a cross-origin
// post to 127.0.0.1; the login form never sends the browser off the
// console. The operator's own names keep working: 127.0.0.1, localhost,
// and the --console-host name a proxy forwards, whose cancel goes through.
func TestConsoleRebinding(t *testing.T) {
	t.Parallel()
	rec := &testupstream.Recorder{}
	up := newUpstream(t, testupstream.Options{Recorder: rec})
	caddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(caddr)
	g := startGateway(t, up, append(slices.Clone(twoReplicaFlags), "--redis-url", "redis://"+redistest.Start(t),
		"--console-listen", caddr, "--console-host", "console.example.test")...)
	mc := newMClient(t, []string{g.URL}, "", true) // anonymous: the id is the credential
	id := mc.createTask(0, "slow", map[string]any{"seconds": 60, "text": "running"}).TaskID
	done := mc.createTask(0, "slow", map[string]any{"seconds": 0, "text": "SECRET-RESULT-TEXT"}).TaskID
	mc.waitTask(0, done, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rec.WaitFor(ctx, "slow", testupstream.Called, 2); err != nil {
		t.Fatal(err)
	}
	send := consoleSender(t, "http://"+caddr)
	evil := "rebind.attacker.example:" + port
	own := "127.0.0.1:" + port
	for _, p := range []string{"/", "/?status=completed", "/tasks/" + id, "/tasks/" + done + "?show=result", "/failures", "/tools",
		"/replicas", "/static/console.css", "/static/live.js", "/login?next=%2F", "/live/tasks", "/live/tasks/" + id} {
		code, body := send("GET", p, evil, nil, nil)
		if code != http.StatusMisdirectedRequest || !strings.Contains(body, "--console-host") {
			t.Errorf("GET %s as %s = %d %q, want 421 naming --console-host", p, evil, code, body)
		}
		for _, secret := range []string{id, done, "SECRET-RESULT-TEXT"} {
			if strings.Contains(body, secret) {
				t.Errorf("GET %s as %s leaks %s", p, evil, secret)
			}
		}
	}
	// The operator's page has the CSRF token: say the attacker got it.
	code, page := send("GET", "/tasks/"+id, own, nil, nil)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		t.Fatalf("the operator's task page = %d, no CSRF token:\n%s", code, page)
	}
	form := url.Values{"csrf": {m[1]}}
	if code, _ := send("POST", "/tasks/"+id+"/cancel", evil, map[string]string{"Origin": "http://" + evil}, form); code != http.StatusMisdirectedRequest {
		t.Errorf("cancel as %s = %d, want 421", evil, code)
	}
	if code, _ := send("POST", "/tasks/"+id+"/cancel", own, map[string]string{"Origin": "http://" + evil}, form); code != http.StatusForbidden {
		t.Errorf("cancel on %s from the attacker's origin = %d, want 403", own, code)
	}
	if tk := mc.get(0, id); tk.Status != "working" {
		t.Fatalf("after the refused cancels the task is %s", tk.Status)
	}
	// The login form keeps next on the console.
	for _, next := range []string{"/\t/evil.example", "/%09/evil.example", "//evil.example", "/\\evil.example", "https:evil.example"} {
		code, loc := send("POST", "/login", own, map[string]string{"Origin": "http://" + own}, url.Values{"next": {next}})
		if code != http.StatusSeeOther || loc != "/" {
			t.Errorf("login with next %q = %d to %q, want 303 to /", next, code, loc)
		}
	}
	// The operator's own names, and the proxy's public one.
	for _, host := range []string{own, "localhost:" + port, "console.example.test", "console.example.test:8443"} {
		if code, body := send("GET", "/", host, nil, nil); code != http.StatusOK || !strings.Contains(body, id) {
			t.Errorf("GET / as %s = %d, want the list", host, code)
		}
	}
	hdr := map[string]string{"Origin": "https://console.example.test"}
	if code, body := send("POST", "/tasks/"+id+"/cancel", "console.example.test", hdr, form); code != http.StatusSeeOther {
		t.Fatalf("the operator's cancel through the proxy's name = %d %s", code, body)
	}
	if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
		t.Fatalf("the upstream never saw the operator's cancel: %v", err)
	}
}

// consoleSender returns a func that sends a request to the console at
// base as Host host, with hdr and a form, and returns the status and the
// body (the Location of a redirect; nothing of an event stream, which
// would not end).
func consoleSender(t *testing.T, base string) func(method, path, host string, hdr map[string]string, form url.Values) (int, string) {
	hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return func(method, path, host string, hdr map[string]string, form url.Values) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, base+path, body)
		req.Host = host
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s as %s: %v", method, path, host, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusSeeOther {
			return resp.StatusCode, resp.Header.Get("Location")
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp.StatusCode, ""
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}
