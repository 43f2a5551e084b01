package e2e

// One gateway shared by a team: two principals signed in through a real
// OpenID provider (oidc-provider, oidc/provider.mjs: clients "app" and
// "bob"), two replicas on a real redis-server, in front of an HTTP session
// server, a stdio server (a process per session) and an HTTP+SSE server. Each attack a
// hostile team member tried (issue 36) is made here against the built
// binary, with both protocols, and must leave the other principal's
// sessions, tasks and sign-in as they were.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/taskgate/taskgate/internal/authtest"
	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// teamPublic is the public URL both replicas serve under: the audience of
// the team's tokens.
const teamPublic = "http://team.gateway.test/mcp"

// teamReply is one answer of the MCP endpoint.
type teamReply struct {
	Status int
	SID    string   // the answer's Mcp-Session-Id
	Msgs   []rpcMsg // its JSON-RPC messages (a JSON body or an SSE stream)
	Body   string
}

// response is the reply's JSON-RPC response (zero when none came).
func (r teamReply) response() rpcMsg {
	for _, m := range r.Msgs {
		if m.isResponse() {
			return m
		}
	}
	return rpcMsg{}
}

// teamHTTP sends one request of a 2025-11-25 session client to url as the
// holder of authz, in session sid ("" for none).
func teamHTTP(t *testing.T, method, url, authz, sid, body string) teamReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", authz)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	hc := &http.Client{Timeout: 20 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, body, err)
	}
	defer resp.Body.Close()
	out := teamReply{Status: resp.StatusCode, SID: resp.Header.Get("Mcp-Session-Id")}
	if method == http.MethodGet && resp.StatusCode == http.StatusOK {
		return out // a GET stream let through stays open: its status says it
	}
	data, _ := io.ReadAll(resp.Body)
	out.Body = string(data)
	var raws [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, ev := range parseSSE(data) {
			if b, err := json.Marshal(ev.Data); err == nil && ev.Data != nil {
				raws = append(raws, b)
			}
		}
	} else if len(bytes.TrimSpace(data)) > 0 {
		raws = append(raws, data)
	}
	for _, raw := range raws {
		var m rpcMsg
		if json.Unmarshal(raw, &m) == nil {
			out.Msgs = append(out.Msgs, m)
		}
	}
	return out
}

// teamSession is a 2025-11-25 client's session on the team's gateway.
type teamSession struct {
	t     *testing.T
	urls  []string
	authz string
	sid   string
	ids   int
}

// open initializes a session on replica i.
func openTeamSession(t *testing.T, urls []string, i int, authz string) *teamSession {
	t.Helper()
	s := &teamSession{t: t, urls: urls, authz: authz}
	r := teamHTTP(t, http.MethodPost, urls[i], authz, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"team","version":"1"}}}`)
	if r.Status != http.StatusOK || r.SID == "" {
		t.Fatalf("initialize on replica %d: HTTP %d, session %q: %s", i, r.Status, r.SID, r.Body)
	}
	s.sid = r.SID
	s.send(i, "notifications/initialized", nil, false)
	return s
}

// send sends method with params to replica i in the session (a
// notification when !request).
func (s *teamSession) send(i int, method string, params any, request bool) teamReply {
	s.t.Helper()
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	if request {
		s.ids++
		m["id"] = s.ids
	}
	b, _ := json.Marshal(m)
	return teamHTTP(s.t, http.MethodPost, s.urls[i], s.authz, s.sid, string(b))
}

// ok sends a request and returns its result, failing on anything else.
func (s *teamSession) ok(i int, method string, params any) json.RawMessage {
	s.t.Helper()
	r := s.send(i, method, params, true)
	resp := r.response()
	if r.Status != http.StatusOK || resp.Error != nil || resp.Result == nil {
		s.t.Fatalf("%s on replica %d: HTTP %d: %s", method, i, r.Status, r.Body)
	}
	return resp.Result
}

// echo calls the echo tool on replica i and checks its answer.
func (s *teamSession) echo(i int, text string) {
	s.t.Helper()
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	_ = json.Unmarshal(s.ok(i, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": text}}), &res)
	if len(res.Content) == 0 || res.Content[0].Text != text {
		s.t.Fatalf("echo %q on replica %d: %+v", text, i, res)
	}
}

// TestTeamGateway: issue 36's attacks by one principal of a team on
// another's sessions, tasks and sign-in, each refused, each leaving the
// other principal's work as it was.
func TestTeamGateway(t *testing.T) {
	node := oidcNode(t)
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	op := startOIDC(t, node, addr, []jose.JSONWebKey{privateJWK(t, "k1")}, "jwt")
	alice := "Bearer " + op.tokenAs(t, "app", teamPublic, "mcp:tools")
	bob := "Bearer " + op.tokenAs(t, "bob", teamPublic, "mcp:tools")
	for _, up := range []struct {
		name, url string
		replicas  int
	}{
		{"http", newUpstream(t, testupstream.Options{}), 2},
		{"stdio", stdioUpstream(t), 2},
		// An HTTP+SSE session lives on the replica that holds its stream
		// (docs/versions.md): one replica, reached as "both".
		{"http+sse", newSSEUpstream(t, testupstream.Options{}), 1},
	} {
		t.Run(up.name, func(t *testing.T) {
			redisURL := "redis://" + redistest.Start(t)
			var urls, bases []string
			for range up.replicas {
				// Small pools, so one principal can fill its share of them.
				g := startGateway(t, up.url, "--redis-url", redisURL, "--auth-issuer", op.issuer, "--public-url", teamPublic,
					"--task", "slow", "--poll-interval", "100ms", "--max-inflight", "8", "--max-sessions", "6")
				urls, bases = append(urls, g.URL), append(bases, g.base)
			}
			if len(urls) == 1 {
				urls = append(urls, urls[0])
			}
			aliceS := openTeamSession(t, urls, 0, alice)
			bobS := openTeamSession(t, urls, 1, bob)
			aliceS.echo(1, "before") // her session on either replica (stdio: over the hop)

			t.Run("sessions", func(t *testing.T) { teamSessionAttacks(t, urls, aliceS, bob) })
			t.Run("tasks 2025-11-25", func(t *testing.T) { teamTasks2025(t, aliceS, bobS) })
			t.Run("tasks 2026-07-28", func(t *testing.T) {
				teamTasks2026(t, newMClient(t, urls, alice, true), newMClient(t, urls, bob, true))
			})
			t.Run("forged tokens", func(t *testing.T) { teamForgedTokens(t, urls, op.issuer, aliceS) })
			t.Run("noisy neighbour", func(t *testing.T) {
				teamNoisyNeighbour(t, newMClient(t, urls, alice, true), newMClient(t, urls, bob, true))
			})
			if up.name != "http" { // a local server's sessions: stdio children, HTTP+SSE streams
				t.Run("session share", func(t *testing.T) { teamSessionShare(t, urls, alice, bob) })
			}
			t.Run("discovery", func(t *testing.T) { teamDiscovery(t, bases[0]) })

			// Alice ends her session herself: then it is gone for her too.
			if r := teamHTTP(t, http.MethodDelete, urls[1], alice, aliceS.sid, ""); r.Status/100 != 2 {
				t.Fatalf("alice's DELETE: HTTP %d: %s", r.Status, r.Body)
			}
			if r := aliceS.send(0, "tools/list", nil, true); r.Status != http.StatusNotFound {
				t.Errorf("alice's ended session: HTTP %d, want 404", r.Status)
			}
		})
	}
}

// teamSessionAttacks: Bob's valid token with Alice's session id, on each
// replica and with each method, gets what an unknown id gets (404), and
// Alice's session goes on.
func teamSessionAttacks(t *testing.T, urls []string, aliceS *teamSession, bob string) {
	const call = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bob was here"}}}`
	for i, url := range urls {
		for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			body := ""
			if m == http.MethodPost {
				body = call
			}
			r := teamHTTP(t, m, url, bob, aliceS.sid, body)
			if r.Status != http.StatusNotFound {
				t.Errorf("replica %d: bob's %s in alice's session: HTTP %d, want 404: %s", i, m, r.Status, r.Body)
			}
			if m == http.MethodPost {
				unknown := teamHTTP(t, m, url, bob, "00000000-0000-4000-8000-000000000000", body)
				if unknown.Body != r.Body || unknown.Status != r.Status {
					t.Errorf("replica %d: alice's session %d %s, an unknown one %d %s: bob can tell them apart", i, r.Status, r.Body, unknown.Status, unknown.Body)
				}
			}
		}
	}
	aliceS.echo(0, "after bob")
	aliceS.echo(1, "after bob")
}

// teamTasks2025: Bob, in a session of his own, can neither see, read nor
// cancel Alice's 2025-11-25 task, which completes for her.
func teamTasks2025(t *testing.T, aliceS, bobS *teamSession) {
	aliceS.t, bobS.t = t, t
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	raw := aliceS.ok(0, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 1, "text": "alice's"}, "task": map[string]any{"ttl": 60000}})
	if json.Unmarshal(raw, &created) != nil || created.Task.TaskID == "" {
		t.Fatalf("alice's task: %s", raw)
	}
	id := created.Task.TaskID
	for i := range 2 {
		for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			r := bobS.send(i, m, map[string]any{"taskId": id}, true)
			if e := r.response().Error; e == nil || e.Code != -32602 {
				t.Errorf("replica %d: bob's %s on alice's task: HTTP %d: %s, want -32602", i, m, r.Status, r.Body)
			}
		}
		if list := bobS.ok(i, "tasks/list", nil); strings.Contains(string(list), id) {
			t.Errorf("replica %d: bob's tasks/list shows alice's task: %s", i, list)
		}
	}
	res := aliceS.ok(1, "tasks/result", map[string]any{"taskId": id})
	if !strings.Contains(string(res), "slept 1 s: alice's") {
		t.Fatalf("alice's result: %s", res)
	}
}

// teamTasks2026: the same with 2026-07-28 clients and the tasks extension.
func teamTasks2026(t *testing.T, aliceC, bobC *mClient) {
	aliceC, bobC = aliceC.on(t), bobC.on(t)
	tk := aliceC.createTask(0, "slow", map[string]any{"seconds": 1, "text": "alice's"})
	for i := range 2 {
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			params := map[string]any{"taskId": tk.TaskID}
			if m == "tasks/update" {
				params["inputResponses"] = map[string]any{"k": map[string]any{"action": "accept"}}
			}
			r := bobC.call(i, m, params)
			if r.Error == nil || r.Error.Code != -32602 {
				t.Errorf("replica %d: bob's %s on alice's task: %s, want -32602", i, m, r)
			}
		}
	}
	done, _ := aliceC.waitStatus(1, tk.TaskID, "completed")
	checkInlinedResult(t, "alice's task", done.Result, "slept 1 s: alice's", false)
}

// teamForgedTokens: forged and garbage tokens get 401, and the principal
// signed in right after each is served (the authorization server does
// not look down for anyone).
func teamForgedTokens(t *testing.T, urls []string, issuer string, aliceS *teamSession) {
	aliceS.t = t
	claims := map[string]any{"iss": issuer, "sub": "mallory", "aud": teamPublic, "scope": "mcp:tools",
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	none := "eyJhbGciOiJub25lIn0." + jsonB64(claims) + "."
	forged := []string{
		"Bearer garbage",
		"Bearer " + none,
		"Bearer " + authtest.Sign(t, authtest.NewKey(t, "made-up", jose.ES256), claims),
	}
	for n := range 20 { // made-up kids, each a fetch of the key set at most
		forged = append(forged, "Bearer "+authtest.Sign(t, authtest.NewKey(t, fmt.Sprintf("kid-%d", n), jose.ES256), claims))
	}
	for i, f := range forged {
		r := teamHTTP(t, http.MethodPost, urls[i%2], f, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if r.Status != http.StatusUnauthorized {
			t.Errorf("forged token %d: HTTP %d, want 401: %s", i, r.Status, r.Body)
		}
		aliceS.echo(i%2, "still signed in")
	}
	if slices.Contains(forged, aliceS.authz) {
		t.Fatal("a forged token is alice's")
	}
}

func jsonB64(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// teamNoisyNeighbour: Alice starts long tasks as fast as she can on one
// replica (--max-inflight 8: half of it is her share); Bob's task
// creations meanwhile are never refused, and each of Alice's refusals
// names its limit and carries a retry hint.
func teamNoisyNeighbour(t *testing.T, aliceC, bobC *mClient) {
	aliceC, bobC = aliceC.on(t), bobC.on(t)
	var started []string
	refused := 0
	for range 16 {
		r := aliceC.call(0, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 30, "text": "flood"}})
		if r.Error != nil {
			refused++
			var data struct {
				RetryAfterMs int64  `json:"retryAfterMs"`
				Reason       string `json:"reason"`
			}
			if json.Unmarshal(r.Error.Data, &data) != nil || data.RetryAfterMs <= 0 || !strings.Contains(r.Error.Message, "--max-inflight") {
				t.Errorf("alice's refusal: %s, want the limit's flag and data.retryAfterMs", r)
			}
			continue
		}
		started = append(started, decodeTask(t, "alice's task", r.Result).TaskID)
	}
	if refused == 0 || len(started) == 0 {
		t.Fatalf("alice: %d tasks started, %d refused; want her share taken and the rest refused", len(started), refused)
	}
	for i := range 4 {
		tk := bobC.createTask(0, "slow", map[string]any{"seconds": 1, "text": fmt.Sprint("bob ", i)})
		bobC.cancel(0, tk.TaskID)
	}
	for _, id := range started {
		aliceC.cancel(0, id)
	}
}

// teamSessionShare: Alice opens sessions of a local server until her
// share (--max-sessions 6: 3 each) is refused; Bob still opens his.
func teamSessionShare(t *testing.T, urls []string, alice, bob string) {
	const init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"team","version":"1"}}}`
	var opened []string
	var refusal teamReply
	for range 6 {
		r := teamHTTP(t, http.MethodPost, urls[0], alice, "", init)
		if r.SID == "" {
			refusal = r
			break
		}
		opened = append(opened, r.SID)
	}
	if refusal.Body == "" || !strings.Contains(refusal.Body, "--max-sessions-per-principal") || !strings.Contains(refusal.Body, "retryAfterMs") {
		t.Fatalf("alice opened %d sessions; the refusal: HTTP %d %s; want it to name --max-sessions-per-principal with a retry hint", len(opened), refusal.Status, refusal.Body)
	}
	b := openTeamSession(t, urls, 0, bob)
	b.echo(0, "bob's own session")
	for _, sid := range append(opened, b.sid) {
		authz := alice
		if sid == b.sid {
			authz = bob
		}
		teamHTTP(t, http.MethodDelete, urls[0], authz, sid, "")
	}
}

// teamDiscovery: only the documents the RFCs define pass through to the
// upstream; another path that ends like one is not fetched.
func teamDiscovery(t *testing.T, base string) {
	for _, p := range []string{"/internal/admin/.well-known/openid-configuration", "/.well-known/openid-configuration/../admin"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: HTTP %d, want 404", p, resp.StatusCode)
		}
	}
}
