package e2e

// The official MCP conformance suite, every server scenario of the pinned
// version (apart from the extensions: tasks-*, skills) at both protocol
// versions it covers, against the go-sdk's own conformance server
// (everything-server, built from the module cache at the go-sdk version of
// go.mod) direct and through taskgate:
//
//	http-session    taskgate --upstream in front of it as a session server
//	                (2025-11-25 scenarios)
//	http-stateless  taskgate --upstream in front of it as a stateless
//	                server (2026-07-28 scenarios)
//	stdio           taskgate --upstream-command with it as a stdio child
//	                (both versions): it answers server/discover, so
//	                2026-07-28 requests go to one stateless child, and each
//	                2025-11-25 session gets a child of its own initialized at
//	                2025-11-25 (issue 37)
//
// A check that does not fail direct must not fail through taskgate (one
// that succeeds direct and only warns through taskgate, a SHOULD of the
// spec, is logged). The baseline is the server in the shape taskgate
// fronts it: the session server for 2025-11-25 (through http-session, and
// the stdio child's sessions), the stateless one for 2026-07-28. No
// regression is allowed.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	everythingServerPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"
	conf2025            = "2025-11-25"
	conf2026            = "2026-07-28"
)

// serverScenarios lists the suite's server scenarios per protocol version
// (`conformance list --server`), without extension scenarios.
func serverScenarios(t *testing.T, node, suite string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, suite, "list", "--server").Output()
	if err != nil {
		t.Fatalf("conformance list --server: %v", err)
	}
	line := regexp.MustCompile(`^\s*- (\S+) \[([^\]]*)\]`)
	byVersion := map[string][]string{}
	for _, l := range strings.Split(string(out), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for _, v := range strings.Split(m[2], ",") {
			if v == conf2025 || v == conf2026 {
				byVersion[v] = append(byVersion[v], m[1])
			}
		}
	}
	if len(byVersion[conf2025]) < 20 || len(byVersion[conf2026]) < 20 {
		t.Fatalf("conformance list --server: too few scenarios (%d, %d):\n%s", len(byVersion[conf2025]), len(byVersion[conf2026]), out)
	}
	return byVersion
}

// runScenario runs one scenario at version (empty: the suite's default)
// against url, its results in a directory under dir, and returns its
// checks with the suite's exit status; nil checks with why when it wrote
// none.
func runScenario(node, suite, url, scenario, version, dir string) ([]conformanceCheck, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{suite, "server", "--url", url, "--scenario", scenario, "-o", dir}
	if version != "" {
		args = append(args, "--spec-version", version)
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.WaitDelay = 5 * time.Second
	out, runErr := cmd.CombinedOutput()
	files, _ := filepath.Glob(filepath.Join(dir, "server-"+scenario+"-*", "checks.json"))
	if len(files) != 1 {
		return nil, fmt.Errorf("%s: no checks.json (%v)\n%s", scenario, runErr, out)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	var checks []conformanceCheck
	if err := json.Unmarshal(raw, &checks); err != nil {
		return nil, fmt.Errorf("%s: checks.json: %w", scenario, err)
	}
	return checks, runErr
}

// startEverythingServer runs the conformance server over HTTP (stateless
// or with sessions) on a free loopback port, stopped by its PID at the end.
func startEverythingServer(t *testing.T, bin string, stateless bool) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-http", addr, fmt.Sprintf("-stateless=%t", stateless))
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr + "/"
		}
		select {
		case <-exited:
			t.Fatalf("everything-server exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("everything-server not listening on %s: %s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// suiteRun is the whole suite at one version against one target: one
// process runs the scenarios one after another (a process per scenario
// would cost a node start each).
type suiteRun struct {
	target, url, version string
	byScenario           map[string][]conformanceCheck
	err                  error
}

// resultDir is a scenario's results directory: server-NAME-TIMESTAMP.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// runSuite runs every server scenario at version against url (the
// suite's "all" set, which --spec-version narrows to that version's
// scenarios, extensions left out) and reads each scenario's checks.
func runSuite(node, suite, url, version, dir string) (map[string][]conformanceCheck, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--url", url, "--suite", "all", "--spec-version", version, "-o", dir)
	cmd.WaitDelay = 5 * time.Second
	out, runErr := cmd.CombinedOutput()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%v (%v)\n%s", err, runErr, out)
	}
	by := map[string][]conformanceCheck{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			return nil, err
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(raw, &checks); err != nil {
			return nil, fmt.Errorf("%s: checks.json: %w", m[1], err)
		}
		by[m[1]] = checks
	}
	return by, nil
}

// outcomes maps each check of a run (its id, numbered when a scenario
// repeats it) to its status.
func outcomes(checks []conformanceCheck) map[string]string {
	seen := map[string]int{}
	out := map[string]string{}
	for _, c := range checks {
		seen[c.ID]++
		out[fmt.Sprintf("%s#%d", c.ID, seen[c.ID])] = c.Status
	}
	return out
}

// regressions lists the checks that do not fail in base but fail (or are
// missing) in got, and those that succeed in base but only warn in got (a
// SHOULD of the spec, logged).
func regressions(base, got []conformanceCheck) (failed, warned []string) {
	g := outcomes(got)
	for id, st := range outcomes(base) {
		switch {
		case st != "FAILURE" && (g[id] == "FAILURE" || g[id] == ""):
			failed = append(failed, id)
		case st == "SUCCESS" && g[id] == "WARNING":
			warned = append(warned, id)
		}
	}
	sort.Strings(failed)
	sort.Strings(warned)
	return failed, warned
}

func TestConformanceServerSuite(t *testing.T) {
	node, suite := conformanceSuite(t)
	bin := filepath.Join(t.TempDir(), "everything-server")
	if err := buildGo(bin, everythingServerPkg); err != nil {
		t.Fatal(err)
	}
	scenarios := serverScenarios(t, node, suite)
	// Each run has a server of its own: the runs go in parallel, and a
	// scenario of one run that changes the server's tools would send
	// tools/list_changed to another run's open subscriptions/listen
	// stream, ahead of that stream's acknowledgement (a stateless server
	// notifies every listener).
	gwSession := startGateway(t, startEverythingServer(t, bin, false))
	gwStateless := startGateway(t, startEverythingServer(t, bin, true))
	gwStdio := startGateway(t, "stdio:"+bin)

	// The baseline of a target is the server direct in the shape taskgate
	// fronts it.
	runs := []*suiteRun{
		{target: "direct-session", url: startEverythingServer(t, bin, false), version: conf2025},
		{target: "direct-stateless", url: startEverythingServer(t, bin, true), version: conf2026},
		{target: "http-session", url: gwSession.URL, version: conf2025},
		{target: "http-stateless", url: gwStateless.URL, version: conf2026},
		{target: "stdio", url: gwStdio.URL, version: conf2025},
		{target: "stdio", url: gwStdio.URL, version: conf2026},
	}
	baseline := map[string]string{"http-session": "direct-session", "http-stateless": "direct-stateless", "stdio/" + conf2025: "direct-session",
		"stdio/" + conf2026: "direct-stateless"}
	dir := t.TempDir()
	start := time.Now()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.byScenario, r.err = runSuite(node, suite, r.url, r.version, filepath.Join(dir, r.target+"-"+r.version))
		}()
	}
	wg.Wait()
	t.Logf("%d suite runs in %s", len(runs), time.Since(start).Round(time.Second))
	result := map[string][]conformanceCheck{} // target/version/scenario
	for _, r := range runs {
		if r.err != nil {
			t.Fatalf("%s at %s: %v", r.target, r.version, r.err)
		}
		for _, sc := range scenarios[r.version] {
			checks, ok := r.byScenario[sc]
			if !ok {
				t.Errorf("%s at %s: scenario %s did not run", r.target, r.version, sc)
			}
			result[r.target+"/"+r.version+"/"+sc] = checks
		}
	}
	if t.Failed() {
		return
	}
	total, regressed := 0, 0
	for _, r := range runs {
		base := baseline[r.target]
		if base == "" {
			base = baseline[r.target+"/"+r.version]
		}
		if base == "" {
			continue
		}
		pairs, failed := 0, 0
		for _, sc := range scenarios[r.version] {
			pairs++
			got := result[r.target+"/"+r.version+"/"+sc]
			reg, warned := regressions(result[base+"/"+r.version+"/"+sc], got)
			if len(warned) > 0 {
				t.Logf("%s %s %s: %v succeed direct (%s) but only warn through taskgate", r.target, r.version, sc, warned, base)
			}
			if len(reg) == 0 {
				continue
			}
			failed++
			for _, id := range reg {
				msg := ""
				for _, c := range got {
					if strings.HasPrefix(id, c.ID+"#") && c.Status != "SUCCESS" {
						msg = c.ErrorMessage
					}
				}
				t.Errorf("%s %s %s: %s passes direct (%s) but not through taskgate: %s", r.target, r.version, sc, id, base, msg)
			}
		}
		total += pairs
		regressed += failed
		t.Logf("%s at %s: %d scenario/version pairs, %d with regressions", r.target, r.version, pairs, failed)
	}
	t.Logf("through taskgate: %d scenario/version pairs, %d with regressions", total, regressed)
}
