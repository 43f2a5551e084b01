package e2e

// Sign-in through taskgate: the TypeScript SDK's own example server in
// --oauth mode (examples/server/simpleStreamableHttp.js, with the demo
// authorization server it starts beside it: dynamic registration, an
// authorize endpoint that approves at once, opaque tokens checked by
// RFC 7662 introspection at /introspect), driven by the SDK's own OAuth
// client flow (js/oauth.mjs) through taskgate.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
)

// oauthServer is a running simpleStreamableHttp.js --oauth, stopped by
// its PID.
type oauthServer struct {
	mcp, auth string // the MCP server's and the authorization server's ports
	cmd       *exec.Cmd
	out       *syncBuffer
}

// URL is the MCP endpoint as the server names itself (its metadata's
// resource is http://localhost:PORT/mcp).
func (s *oauthServer) URL() string { return "http://localhost:" + s.mcp + "/mcp" }

// Issuer is the demo authorization server.
func (s *oauthServer) Issuer() string { return "http://localhost:" + s.auth }

func startOAuthServer(t *testing.T, node string) *oauthServer {
	t.Helper()
	var s *oauthServer
	for attempt := 0; attempt < 3; attempt++ { // a free port can be taken before the server binds it
		mcpAddr, err1 := freeAddr()
		authAddr, err2 := freeAddr()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		_, mcpPort, _ := net.SplitHostPort(mcpAddr)
		_, authPort, _ := net.SplitHostPort(authAddr)
		s = &oauthServer{mcp: mcpPort, auth: authPort, out: &syncBuffer{}}
		s.cmd = exec.Command(node, "node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js", "--oauth")
		s.cmd.Dir = "js"
		s.cmd.Env = append(s.cmd.Environ(), "MCP_PORT="+mcpPort, "MCP_AUTH_PORT="+authPort)
		s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(s.cmd)
		t.Cleanup(func() {
			_ = s.cmd.Process.Kill()
			<-exited
			if t.Failed() {
				t.Logf("simpleStreamableHttp.js --oauth output:\n%s", s.out.String())
			}
		})
		up := func() bool {
			for _, port := range []string{mcpPort, authPort} {
				c, err := net.Dial("tcp", "127.0.0.1:"+port)
				if err != nil {
					return false
				}
				c.Close()
			}
			return true
		}
		deadline := time.Now().Add(30 * time.Second)
		for !up() && time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Time{}
			case <-time.After(50 * time.Millisecond):
			}
		}
		if up() {
			return s
		}
	}
	t.Fatalf("simpleStreamableHttp.js --oauth did not start:\n%s", s.out.String())
	return nil
}

type oauthFetch struct {
	Label     string `json:"label"`
	Method    string `json:"method"`
	URL       string `json:"url"`
	Status    int    `json:"status"`
	Challenge string `json:"challenge"`
}

type oauthOut struct {
	Error            string       `json:"error"`
	Fetches          []oauthFetch `json:"fetches"`
	AuthorizationURL string       `json:"authorizationURL"`
	Registered       bool         `json:"registered"`
	TokenType        string       `json:"tokenType"`
	NewToken         bool         `json:"newToken"`
	AnsweredBy       []string     `json:"answeredBy"`
	Tools            []struct {
		Name        string `json:"name"`
		TaskSupport string `json:"taskSupport"`
	} `json:"tools"`
	IDs    map[string]string `json:"ids"`
	Forged struct {
		Status    int    `json:"status"`
		Challenge string `json:"challenge"`
	} `json:"forged"`
	Steps struct {
		Greet          string                  `json:"greet"`
		GatewayTask    struct{ Status string } `json:"gatewayTask"`
		GatewayResult  string                  `json:"gatewayResult"`
		NativeTask     struct{ Status string } `json:"nativeTask"`
		NativeResult   string                  `json:"nativeResult"`
		FirstGet       string                  `json:"firstGet"`
		FirstDone      string                  `json:"firstDone"`
		FirstAsked     string                  `json:"firstAsked"`
		SecondAnswered jsAttempt               `json:"secondAnswered"`
		SecondGet      jsAttempt               `json:"secondGet"`
		SecondList     jsAttempt               `json:"secondList"`
		SecondResult   jsAttempt               `json:"secondResult"`
		OtherGet       jsAttempt               `json:"otherGet"`
		OtherCancel    jsAttempt               `json:"otherCancel"`
		OtherList      jsAttempt               `json:"otherList"`
		SecondCancel   jsAttempt               `json:"secondCancel"`
		FirstAfter     jsAttempt               `json:"firstAfter"`
		AfterForged    jsAttempt               `json:"afterForged"`
		SecondGreet    jsAttempt               `json:"secondGreet"`
	} `json:"steps"`
}

func runOAuth(t *testing.T, node, mode string, urls ...string) *oauthOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "oauth.mjs", mode, strings.Join(urls, ","))
	cmd.Dir = "js"
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var out oauthOut
	if jerr := json.Unmarshal(stdout.Bytes(), &out); jerr != nil {
		t.Fatalf("oauth.mjs %s: %v (%v)\nstdout: %s\nstderr: %s", mode, err, jerr, stdout.String(), stderr.String())
	}
	if err != nil || out.Error != "" {
		t.Fatalf("oauth.mjs %s: %v: %s\nfetches: %+v\nstderr: %s", mode, err, out.Error, out.Fetches, stderr.String())
	}
	return &out
}

// TestOAuthSignInThroughGateway: with no auth flags, the upstream stays
// the resource server, and the SDK's OAuth flow finds everything it needs
// from the gateway's URL: the 401's challenge points at the gateway's
// metadata, whose resource is the gateway's URL (the SDK refuses any
// other), and names the upstream's authorization server. Then the client
// works as it does directly: tools, a call, a task of the gateway's, one
// of the upstream's own.
func TestOAuthSignInThroughGateway(t *testing.T) {
	node := ensureJS(t)
	srv := startOAuthServer(t, node)
	gw := startGateway(t, srv.URL(), "--task", "greet", "--poll-interval", "100ms")
	out := runOAuth(t, node, "flow", gw.URL)

	if !out.Registered || !strings.EqualFold(out.TokenType, "bearer") {
		t.Errorf("registered %v, token type %q", out.Registered, out.TokenType)
	}
	metaURL := gw.base + "/.well-known/oauth-protected-resource/mcp"
	var challenged, metadata, serverMeta bool
	for _, f := range out.Fetches {
		switch {
		case f.Status == http.StatusUnauthorized && strings.HasPrefix(f.URL, gw.URL):
			challenged = strings.Contains(f.Challenge, `resource_metadata="`+metaURL+`"`)
		case f.URL == metaURL:
			metadata = f.Status == http.StatusOK
		case strings.HasPrefix(f.URL, srv.Issuer()+"/.well-known/"):
			serverMeta = serverMeta || f.Status == http.StatusOK
		}
	}
	if !challenged || !metadata || !serverMeta {
		t.Errorf("discovery: challenge pointed at the gateway %v, its metadata fetched %v, the authorization server's %v; fetches: %+v",
			challenged, metadata, serverMeta, out.Fetches)
	}
	// RFC 8707: the client asked for a token for the gateway's URL.
	if !strings.Contains(out.AuthorizationURL, "resource="+url.QueryEscape(gw.URL)) {
		t.Errorf("authorization URL %s does not ask for resource %s", out.AuthorizationURL, gw.URL)
	}
	ts := map[string]string{}
	for _, tool := range out.Tools {
		ts[tool.Name] = tool.TaskSupport
	}
	if ts["greet"] != "optional" || ts["delay"] != "required" {
		t.Errorf("tools through taskgate: %v", ts)
	}
	if out.Steps.Greet != "Hello, plain!" {
		t.Errorf("greet: %q", out.Steps.Greet)
	}
	if out.Steps.GatewayTask.Status != "completed" || out.Steps.GatewayResult != "Hello, task!" || !isUUID(out.IDs["gatewayTask"]) {
		t.Errorf("the gateway's task %s: %s %q", out.IDs["gatewayTask"], out.Steps.GatewayTask.Status, out.Steps.GatewayResult)
	}
	if out.Steps.NativeTask.Status != "completed" || out.Steps.NativeResult != "Completed 200ms delay" || isUUID(out.IDs["nativeTask"]) {
		t.Errorf("the upstream's own task %s: %s %q", out.IDs["nativeTask"], out.Steps.NativeTask.Status, out.Steps.NativeResult)
	}

	// The gateway's metadata names it as the resource, and the upstream's
	// authorization server; the root form answers the same.
	for _, u := range []string{metaURL, gw.base + "/.well-known/oauth-protected-resource"} {
		var doc struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			Scopes               []string `json:"scopes_supported"`
		}
		getJSON(t, u, &doc)
		if doc.Resource != gw.URL || len(doc.AuthorizationServers) != 1 || !strings.HasPrefix(doc.AuthorizationServers[0], srv.Issuer()) ||
			len(doc.Scopes) != 1 || doc.Scopes[0] != "mcp:tools" {
			t.Errorf("%s: %+v", u, doc)
		}
	}
	// The upstream serves its authorization server's metadata on its own
	// origin too (the 2025-03-26 fallback): the gateway passes it through.
	var as struct {
		Issuer        string `json:"issuer"`
		TokenEndpoint string `json:"token_endpoint"`
	}
	getJSON(t, gw.base+"/.well-known/oauth-authorization-server", &as)
	if !strings.HasPrefix(as.Issuer, srv.Issuer()) || !strings.HasPrefix(as.TokenEndpoint, srv.Issuer()) {
		t.Errorf("authorization server metadata through the gateway: %+v", as)
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", u, err, body)
	}
}

// TestOAuthTasksOutliveTokens: with validation on (the demo's
// introspection endpoint), a task belongs to the principal: the same
// client signed in again (a new token, a new session) on another replica
// sharing one redis-server reads, lists, gets the result of and cancels
// the tasks its first token created, the gateway's and the upstream's own
// (routed to the session that created it), and answers the question one
// asks; another client (another principal) gets -32602 for them and lists
// none.
func TestOAuthTasksOutliveTokens(t *testing.T) {
	node := ensureJS(t)
	srv := startOAuthServer(t, node)
	addrs := make([]string, 2)
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = a
	}
	// Each replica accepts tokens issued for either's URL: behind one
	// load balancer they would share one public URL.
	args := []string{"--redis-url", "redis://" + redistest.Start(t), "--poll-interval", "100ms", "--task", "greet",
		"--task", "collect-user-info", "--auth-issuer", srv.Issuer(), "--auth-introspection-url", srv.Issuer() + "/introspect",
		"--auth-audience", "http://" + addrs[0] + "/mcp,http://" + addrs[1] + "/mcp"}
	var urls []string
	for _, a := range addrs {
		g, err := startGatewayAt(t, a, srv.URL(), args)
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, g.URL)
	}
	out := runOAuth(t, node, "refresh", urls...)
	s := out.Steps
	if !out.NewToken || s.FirstGet != "working" || s.FirstDone != "completed" || s.FirstAsked != "input_required" {
		t.Fatalf("setup: new token %v, held %q, done %q, asked %q", out.NewToken, s.FirstGet, s.FirstDone, s.FirstAsked)
	}
	if !strings.Contains(string(s.SecondAnswered.Result), "Collected contact information") || !strings.Contains(string(s.SecondAnswered.Result), "Ada") ||
		len(out.AnsweredBy) != 1 || out.AnsweredBy[0] != "taskgate-e2e-second" {
		t.Errorf("the second token answers the task's question: %s %+v, answered by %v", s.SecondAnswered.Result, s.SecondAnswered.Error, out.AnsweredBy)
	}
	if s.SecondGet.Error != nil || string(s.SecondGet.Result) != `"working"` {
		t.Errorf("the second token reads the held task: %s %+v", s.SecondGet.Result, s.SecondGet.Error)
	}
	for _, id := range []string{out.IDs["held"], out.IDs["done"]} {
		if !strings.Contains(string(s.SecondList.Result), id) {
			t.Errorf("the second token's list %s %+v lacks %s", s.SecondList.Result, s.SecondList.Error, id)
		}
		if strings.Contains(string(s.OtherList.Result), id) {
			t.Errorf("another principal lists %s: %s", id, s.OtherList.Result)
		}
	}
	if string(s.SecondResult.Result) != `"Hello, done!"` {
		t.Errorf("the second token reads the result: %s %+v", s.SecondResult.Result, s.SecondResult.Error)
	}
	for name, a := range map[string]jsAttempt{"get": s.OtherGet, "cancel": s.OtherCancel} {
		if a.Error == nil || a.Error.Code != -32602 {
			t.Errorf("another principal's %s: %s %+v, want -32602", name, a.Result, a.Error)
		}
	}
	if s.OtherList.Error != nil {
		t.Errorf("another principal's list: %+v", s.OtherList.Error)
	}
	if string(s.SecondCancel.Result) != `"cancelled"` || string(s.FirstAfter.Result) != `"cancelled"` {
		t.Errorf("cancel with the second token: %s %+v; then the first reads %s %+v",
			s.SecondCancel.Result, s.SecondCancel.Error, s.FirstAfter.Result, s.FirstAfter.Error)
	}
}
