package e2e

// --upstream-scope principal (docs/stdio.md) with a real npm stdio server,
// server-memory, behind two replicas of the built binary on a real
// redis-server, its clients signed in through the real OpenID provider
// (oidc/provider.mjs: clients "app", Alice, and "bob", Bob, as in
// team_test.go). server-memory keeps its knowledge graph in a file; the
// command gives each process a file of its own (mktemp, as in
// TestStdioServerMemory), so a graph is one process's state, and two
// sessions see the same graph only when they share a process.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/authtest"
	"github.com/taskgate/taskgate/internal/redistest"
)

// memoryCommand is server-memory as an --upstream-command whose every
// process keeps its graph in a new file under dir.
func memoryCommand(t testing.TB, node, dir string) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("js", "node_modules", "@modelcontextprotocol/server-memory/dist/index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("server-memory is not installed (npm ci in e2e/js): %v", err)
	}
	return "stdio:" + shellWords([]string{"sh", "-c", `MEMORY_FILE_PATH=$(mktemp -p "$1") exec "$2" "$3"`, "sh", dir, node, script})
}

// TestStdioPrincipal: Alice's sessions, one per client (go-sdk on
// replica 1; a raw 2025-11-25 session, the TypeScript SDK and a 2026-07-28
// go-sdk client, whose upstream session the gateway holds, on replica 2),
// and Bob's (go-sdk, replica 2). With --upstream-scope principal,
// Alice's sessions share one process (on replica 1, which her first
// session started; her sessions opened on replica 2 are served there over
// the hop): each sees what the others wrote; Bob has a process of his own
// (on replica 2), sees an empty graph, and what he writes Alice does not
// see. With --upstream-scope session, the same steps show every session a
// graph of its own: the "session" subtest asserts the opposite of
// sharing, so the "principal" one can fail.
func TestStdioPrincipal(t *testing.T) {
	node := ensureJS(t)
	opNode := oidcNode(t)
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	op := startOIDC(t, opNode, addr, []jose.JSONWebKey{privateJWK(t, "k1")}, "jwt")
	alice := op.tokenAs(t, "app", teamPublic, "mcp:tools")
	bob := op.tokenAs(t, "bob", teamPublic, "mcp:tools")
	command := memoryCommand(t, node, t.TempDir())

	for _, scope := range []string{"principal", "session"} {
		t.Run(scope, func(t *testing.T) {
			shared := scope == "principal"
			redisURL := "redis://" + redistest.Start(t)
			var gs []*gateway
			var urls []string
			for range 2 {
				// No warm children: every child of a replica serves a session.
				g := startGateway(t, command, "--redis-url", redisURL, "--auth-issuer", op.issuer, "--public-url", teamPublic,
					"--upstream-scope", scope, "--upstream-warm", "0")
				gs, urls = append(gs, g), append(urls, g.URL)
			}
			// want is what Alice's sessions see: the graph of all of them
			// under principal scope, else the session's own.
			want := func(all, own []string) []string {
				if shared {
					return all
				}
				return own
			}

			// Alice's first session (go-sdk, replica 1) writes ada.
			aliceGo := connectGo(t, urls[0], "2025-11-25", withToken(alice), false)
			memoryCreate(t, aliceGo, "ada")
			if got := memoryRead(t, aliceGo); !slices.Equal(got, []string{"ada"}) {
				t.Fatalf("alice's go-sdk session reads %q after writing ada", got)
			}

			// Her second (raw 2025-11-25 session, replica 2) sees it only
			// when it shares her process.
			aliceRaw := openTeamSession(t, urls, 1, "Bearer "+alice)
			if got, w := rawMemoryRead(aliceRaw, 1), want([]string{"ada"}, nil); !slices.Equal(got, w) {
				t.Errorf("alice's second session (replica 2) reads %q, want %q", got, w)
			}
			// Her processes: one in all (on replica 1), or one per session.
			if shared {
				checkChildren(t, gs, scope, 1, 0)
			} else {
				checkChildren(t, gs, scope, 1, 1)
			}

			// Her third (the TypeScript SDK, replica 2) reads, writes grace
			// and ends its session.
			ts := runPrincipalMemory(t, node, urls[1], alice, "grace")
			if w := want([]string{"ada"}, nil); !slices.Equal(ts.Before, w) {
				t.Errorf("alice's TypeScript session (replica 2) reads %q first, want %q", ts.Before, w)
			}
			if w := want([]string{"ada", "grace"}, []string{"grace"}); !slices.Equal(ts.After, w) {
				t.Errorf("alice's TypeScript session reads %q after writing grace, want %q", ts.After, w)
			}
			if got, w := memoryRead(t, aliceGo), want([]string{"ada", "grace"}, []string{"ada"}); !slices.Equal(got, w) {
				t.Errorf("alice's go-sdk session reads %q after the TypeScript one wrote grace, want %q", got, w)
			}

			// A 2026-07-28 go-sdk client of Alice's (replica 2): it has no
			// session, the gateway holds one on the upstream for it (its
			// owner's), which joins her process like any session of hers.
			aliceModern := connectGo(t, urls[1], "", withToken(alice), false)
			if v := aliceModern.InitializeResult().ProtocolVersion; v != "2026-07-28" {
				t.Errorf("alice's go-sdk default client is at %q, want 2026-07-28", v)
			}
			if got, w := memoryRead(t, aliceModern), want([]string{"ada", "grace"}, nil); !slices.Equal(got, w) {
				t.Errorf("alice's 2026-07-28 client reads %q, want %q", got, w)
			}
			// Bob (go-sdk, replica 2) sees none of it, and writes his own.
			bobGo := connectGo(t, urls[1], "2025-11-25", withToken(bob), false)
			if got := memoryRead(t, bobGo); len(got) != 0 {
				t.Errorf("bob reads %q, want an empty graph", got)
			}
			memoryCreate(t, bobGo, "bob-note")
			if got := memoryRead(t, bobGo); !slices.Equal(got, []string{"bob-note"}) {
				t.Errorf("bob reads %q after writing bob-note", got)
			}
			if got, w := memoryRead(t, aliceGo), want([]string{"ada", "grace"}, []string{"ada"}); !slices.Equal(got, w) {
				t.Errorf("alice's go-sdk session reads %q after bob wrote, want %q", got, w)
			}
			// Alice's raw session, now through replica 1 (it follows her
			// session to its process).
			if got, w := rawMemoryRead(aliceRaw, 0), want([]string{"ada", "grace"}, nil); !slices.Equal(got, w) {
				t.Errorf("alice's second session (through replica 1) reads %q after bob wrote, want %q", got, w)
			}
			if shared { // nothing ended meanwhile but a session of Alice's process
				checkChildren(t, gs, scope, 1, 1)
			}
		})
	}
}

// TestStdioPrincipalDualEra (issue 37, item 3: a principal's child
// "serves no one else"): the test server as a stdio child that speaks
// 2026-07-28 as well as 2025-11-25 (as go-sdk 1.8's servers do), each of
// its processes telling its PID (the pid tool). With --upstream-scope
// principal, Alice's 2025-11-25 session and her two 2026-07-28 clients
// (go-sdk, two tokens) are served by her one child, and Bob's 2026-07-28
// client by another: no stateless child serves both. With
// --upstream-scope session (the contrast, documented in docs/stdio.md),
// the 2026-07-28 clients of both share the one stateless child, and
// Alice's 2025-11-25 session has a child of its own.
func TestStdioPrincipalDualEra(t *testing.T) {
	if stdioBuildErr != nil {
		t.Fatalf("test server binary unavailable: %v", stdioBuildErr)
	}
	const public = "http://dual.gateway.test/mcp"
	iss := authtest.NewIssuer(t, "", false)
	token := func(sub string) string {
		claims := iss.Claims(public)
		claims["sub"] = sub
		return iss.Token(claims)
	}
	alice, alice2, bob := token("alice"), token("alice"), token("bob")
	if alice == alice2 {
		t.Fatal("alice's two tokens are one: want two owners of one principal")
	}
	command := "stdio:" + stdioServerBin + " --stdio --protocol-version 2026-07-28"
	pid := func(gc *goClient) string {
		t.Helper()
		text, isErr := gc.callText(t, &mcp.CallToolParams{Name: "pid", Arguments: map[string]any{}})
		if isErr || text == "" {
			t.Fatalf("pid: %q (error %v)", text, isErr)
		}
		return text
	}
	for _, scope := range []string{"principal", "session"} {
		t.Run(scope, func(t *testing.T) {
			g := startGateway(t, command, "--auth-issuer", iss.URL, "--public-url", public,
				"--upstream-scope", scope, "--upstream-warm", "0")
			aliceOld := connectGo(t, g.URL, "2025-11-25", withToken(alice), false)
			aliceNew := connectGo(t, g.URL, "", withToken(alice), false)
			aliceNew2 := connectGo(t, g.URL, "", withToken(alice2), false)
			bobNew := connectGo(t, g.URL, "", withToken(bob), false)
			for name, gc := range map[string]*goClient{"alice's": aliceNew, "alice's second": aliceNew2, "bob's": bobNew} {
				if v := gc.InitializeResult().ProtocolVersion; v != "2026-07-28" {
					t.Fatalf("%s go-sdk default client is at %q, want 2026-07-28", name, v)
				}
			}
			old, mine, mine2, his := pid(aliceOld), pid(aliceNew), pid(aliceNew2), pid(bobNew)
			t.Logf("--upstream-scope %s: alice 2025-11-25 in %s, alice 2026-07-28 in %s and %s, bob 2026-07-28 in %s", scope, old, mine, mine2, his)
			if scope == "session" {
				if mine != his || mine2 != his || old == his {
					t.Errorf("session scope: want the 2026-07-28 clients on the one stateless child and the 2025-11-25 session on its own")
				}
				return
			}
			if old != mine || mine2 != mine {
				t.Errorf("alice's 2025-11-25 session and her 2026-07-28 clients ran in different processes; want her one child")
			}
			if his == mine {
				t.Errorf("bob's 2026-07-28 client ran in alice's process")
			}
			checkChildren(t, []*gateway{g}, scope, 2) // alice's and bob's; no stateless one
		})
	}
}

// memoryCreate adds an entity named name to gc's graph.
func memoryCreate(t *testing.T, gc *goClient, name string) {
	t.Helper()
	args := map[string]any{"entities": []map[string]any{{"name": name, "entityType": "person", "observations": []string{"added by the go-sdk client"}}}}
	if text, isErr := gc.callText(t, &mcp.CallToolParams{Name: "create_entities", Arguments: args}); isErr {
		t.Fatalf("create_entities %s: %s", name, text)
	}
}

// memoryRead is the names of the entities of gc's graph, sorted.
func memoryRead(t *testing.T, gc *goClient) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := gc.CallTool(ctx, &mcp.CallToolParams{Name: "read_graph", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("read_graph: %v", err)
	}
	raw, _ := json.Marshal(res)
	return graphNames(t, raw)
}

// rawMemoryRead is memoryRead for a raw session, through replica i.
func rawMemoryRead(s *teamSession, i int) []string {
	s.t.Helper()
	return graphNames(s.t, s.ok(i, "tools/call", map[string]any{"name": "read_graph", "arguments": map[string]any{}}))
}

// graphNames is the names of the entities in read_graph's result.
func graphNames(t *testing.T, result json.RawMessage) []string {
	t.Helper()
	var res struct {
		IsError    bool `json:"isError"`
		Structured *struct {
			Entities []struct {
				Name string `json:"name"`
			} `json:"entities"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(result, &res); err != nil || res.IsError || res.Structured == nil {
		t.Fatalf("read_graph: %s (%v)", result, err)
	}
	var names []string
	for _, e := range res.Structured.Entities {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	return names
}

// principalMemoryOut is what js/principal-memory.mjs saw.
type principalMemoryOut struct {
	Version string   `json:"version"`
	Before  []string `json:"before"`
	After   []string `json:"after"`
	Error   string   `json:"error"`
}

// runPrincipalMemory runs js/principal-memory.mjs against url as the
// holder of token, writing names.
func runPrincipalMemory(t *testing.T, node, url, token string, names ...string) principalMemoryOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"principal-memory.mjs", url}, names...)...)
	cmd.Dir = "js"
	cmd.Env = append(os.Environ(), "TG_TOKEN="+token)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	var out principalMemoryOut
	if jerr := json.Unmarshal(bytes.TrimSpace(raw), &out); err != nil || jerr != nil || out.Error != "" {
		t.Fatalf("node principal-memory.mjs: %v %v %s\nstdout: %s\nstderr: %s", err, jerr, out.Error, raw, stderr.Bytes())
	}
	if out.Version != "2025-11-25" {
		t.Errorf("the TypeScript client's session is at %q, want 2025-11-25", out.Version)
	}
	return out
}

// checkChildren checks each replica's children of scope by its metric
// (taskgate_stdio_children{scope}) and by its processes (its live
// children in /proc: there are no warm ones, and the version probe's is
// stopped before the replica serves).
func checkChildren(t *testing.T, gs []*gateway, scope string, want ...int) {
	t.Helper()
	for i, g := range gs {
		metric := sample(metricsText(t, g.base+"/metrics"), `taskgate_stdio_children{scope="`+scope+`"}`)
		procs := liveChildren(t, g.cmd.Process.Pid)
		if metric != float64(want[i]) || len(procs) != want[i] {
			t.Errorf("replica %d: taskgate_stdio_children{scope=%q} %v, child processes %v; want %d", i+1, scope, metric, procs, want[i])
		}
	}
}

// liveChildren is the PIDs of pid's child processes that have not exited.
func liveChildren(t testing.TB, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := procStat(p)
		if ok && st.ppid == pid && st.state != "Z" {
			kids = append(kids, p)
		}
	}
	return kids
}

// procStatus is what /proc/PID/stat says of a process.
type procStatus struct {
	state string
	ppid  int
}

// procStat reads /proc/pid/stat; false when the process is gone.
func procStat(pid int) (procStatus, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStatus{}, false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])) // after comm, which may hold spaces
	if len(f) < 2 {
		return procStatus{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return procStatus{state: f[0], ppid: ppid}, true
}

// BenchmarkStdioPrincipalMemory: what the children of a team cost, by
// scope. 50 principals (each its own subject, tokens signed by a test
// issuer the gateway trusts) open 3 sessions each of server-memory (node)
// on one gateway, 4 initializes at a time, each session reading its graph
// once; then the resident memory of all the gateway's descendant
// processes is read from /proc (smaps_rollup: PSS, each shared page split
// among the processes that map it, and RSS, each counted whole).
// --upstream-scope session (150 children) and then principal (50), in the
// same run, one gateway after the other. It reports both totals in MiB and
// principal/session (target: at most 0.4, PSS).
//
//	go test -run '^$' -bench StdioPrincipalMemory -benchtime 1x -timeout 30m ./e2e
//
// It needs about 10 GiB free (150 node processes at once) and skips with
// less.
func BenchmarkStdioPrincipalMemory(b *testing.B) {
	const principals, perPrincipal, parallel = 50, 3, 4
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skipf("needs node on PATH: %v", err)
	}
	if _, err := os.Stat(filepath.Join("js", "node_modules", "@modelcontextprotocol/server-memory/dist/index.js")); err != nil {
		b.Skipf("server-memory is not installed (npm ci in e2e/js): %v", err)
	}
	if free := memAvailable(); free < 10<<30 {
		b.Skipf("needs about 10 GiB of memory available, has %d MiB", free>>20)
	}
	const public = "http://bench.gateway.test/mcp"
	iss := authtest.NewIssuer(b, "", false)
	var tokens []string
	for i := range principals {
		claims := iss.Claims(public)
		claims["sub"] = fmt.Sprintf("member-%02d", i)
		tokens = append(tokens, "Bearer "+iss.Token(claims))
	}
	command := memoryCommand(b, node, b.TempDir())
	figures := map[string]childMemory{}
	b.ResetTimer()
	for range b.N {
		for _, scope := range []string{"session", "principal"} {
			g := startGateway(b, command, "--auth-issuer", iss.URL, "--public-url", public, "--upstream-scope", scope,
				"--upstream-warm", "0", "--max-sessions", strconv.Itoa(principals*perPrincipal+10), "--max-sessions-per-principal", "0")
			start := time.Now()
			var sids [][2]string     // authorization, session id
			for range perPrincipal { // each principal's first sessions, then its second ones, …
				opened := openBenchSessions(b, g.URL, tokens, parallel)
				sids = append(sids, opened...)
			}
			m := descendantMemory(b, g.cmd.Process.Pid)
			m.open = time.Since(start)
			figures[scope] = m
			b.Logf("--upstream-scope %s: %d sessions opened in %s; %d child processes, PSS %d MiB, RSS %d MiB",
				scope, len(sids), m.open.Round(time.Second), m.procs, m.pss>>20, m.rss>>20)
			if want := map[string]int{"session": principals * perPrincipal, "principal": principals}[scope]; m.procs != want {
				b.Fatalf("--upstream-scope %s: %d child processes, want %d", scope, m.procs, want)
			}
			endBenchSessions(b, g, sids, parallel)
		}
	}
	b.StopTimer()
	s, p := figures["session"], figures["principal"]
	b.ReportMetric(float64(s.pss)/(1<<20), "session-pss-MiB")
	b.ReportMetric(float64(p.pss)/(1<<20), "principal-pss-MiB")
	b.ReportMetric(float64(s.rss)/(1<<20), "session-rss-MiB")
	b.ReportMetric(float64(p.rss)/(1<<20), "principal-rss-MiB")
	b.ReportMetric(float64(p.pss)/float64(s.pss), "principal/session-pss")
	b.ReportMetric(float64(p.rss)/float64(s.rss), "principal/session-rss")
}

// childMemory is the resident memory of a gateway's descendants.
type childMemory struct {
	procs    int
	pss, rss int64 // bytes
	open     time.Duration
}

// openBenchSessions opens one 2025-11-25 session at url as each holder
// of tokens, parallel at a time, each reading its graph once, and returns
// them (authorization, session id).
func openBenchSessions(b *testing.B, url string, tokens []string, parallel int) [][2]string {
	b.Helper()
	out := make([][2]string, len(tokens))
	errs := make([]error, len(tokens))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, authz := range tokens {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			sid, err := benchSession(url, authz)
			out[i], errs[i] = [2]string{authz, sid}, err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return out
}

// benchSession initializes a session as authz and reads its graph.
func benchSession(url, authz string) (string, error) {
	hc := &http.Client{Timeout: 2 * time.Minute}
	post := func(sid, body string) (string, string, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", authz)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", "", err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			return "", "", fmt.Errorf("%.40s: HTTP %d %s", body, resp.StatusCode, data)
		}
		return resp.Header.Get("Mcp-Session-Id"), string(data), nil
	}
	sid, _, err := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	if err != nil {
		return "", err
	}
	if _, _, err := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return sid, err
	}
	_, body, err := post(sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_graph","arguments":{}}}`)
	if err == nil && !strings.Contains(body, `"entities"`) {
		err = fmt.Errorf("read_graph: %s", body)
	}
	return sid, err
}

// endBenchSessions ends the sessions (DELETE), stops the gateway, and
// waits until its children are gone, so the next scope is measured alone.
func endBenchSessions(b *testing.B, g *gateway, sids [][2]string, parallel int) {
	b.Helper()
	kids := descendants(g.cmd.Process.Pid)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, s := range sids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			req, _ := http.NewRequest(http.MethodDelete, g.URL, nil)
			req.Header.Set("Authorization", s[0])
			req.Header.Set("Mcp-Session-Id", s[1])
			if resp, err := (&http.Client{Timeout: time.Minute}).Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	g.stop()
	deadline := time.Now().Add(time.Minute)
	for _, pid := range kids {
		for {
			if st, ok := procStat(pid); !ok || st.state == "Z" {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("child %d of the stopped gateway still runs a minute later", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// descendants is the PIDs of pid's live descendant processes.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(p); ok && st.state != "Z" {
			children[st.ppid] = append(children[st.ppid], p)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// descendantMemory sums PSS and RSS (/proc/PID/smaps_rollup) over pid's
// descendants.
func descendantMemory(b *testing.B, pid int) childMemory {
	b.Helper()
	var m childMemory
	for _, p := range descendants(pid) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			b.Fatalf("child %d: %v", p, err)
		}
		m.procs++
		m.pss += kbField(data, "Pss:")
		m.rss += kbField(data, "Rss:")
	}
	return m
}

// kbField is the value in bytes of the "Name:   N kB" line of a /proc file.
func kbField(data []byte, name string) int64 {
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// memAvailable is MemAvailable of /proc/meminfo in bytes (0 when unknown).
func memAvailable() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return kbField(data, "MemAvailable:")
}
