package e2e

// The official MCP conformance suite (@modelcontextprotocol/conformance,
// from e2e/conformance/package.json) runs its tasks-extension server
// scenarios against taskgate, a 2026-07-28 client's view of an upstream
// with no tasks of its own: in front of a stateless 2026-07-28 upstream
// and in front of a legacy session upstream, whose tools are the
// scenarios' fixtures (testupstream Conformance) and whose task modes come
// from taskgate's rules (testupstream.ConformanceFlags and
// ConformancePolicy). In front of the legacy upstream,
// tasks-mrtr-composition checks that the questions a session upstream asks
// at once come as MRTR rounds before the task.

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// conformanceScenarios are the suite's tasks-* server scenarios that send
// requests (tasks-status-notifications is always skipped by the suite).
var conformanceScenarios = []string{
	"tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
	"tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-required-task-error",
	"tasks-mrtr-composition",
}

// conformanceSuite returns the node binary and the suite's entry point,
// installing them (npm ci in e2e/conformance) when they are missing.
func conformanceSuite(t *testing.T) (node, suite string) {
	t.Helper()
	jsMu.Lock()
	defer jsMu.Unlock()
	node, _ = filepath.Abs("conformance/node_modules/.bin/node")
	suite, _ = filepath.Abs("conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js")
	if _, err := os.Stat(suite); err == nil {
		if _, err := os.Stat(node); err == nil {
			return node, suite
		}
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("e2e/conformance/node_modules is missing and npm is not on PATH to install it: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = "conformance"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in e2e/conformance: %v\n%s", err, out)
	}
	return node, suite
}

type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// runConformance runs one scenario against url and returns its checks.
func runConformance(t *testing.T, node, suite, url, scenario string) []conformanceCheck {
	t.Helper()
	checks, runErr := runScenario(node, suite, url, scenario, "", t.TempDir())
	if checks == nil {
		t.Fatal(runErr)
	}
	failed := false
	for _, c := range checks {
		if c.Status == "FAILURE" {
			failed = true
		}
	}
	if failed != (runErr != nil) {
		t.Errorf("%s: exit %v, but checks say failed=%v", scenario, runErr, failed)
	}
	return checks
}

func TestConformanceTasks(t *testing.T) {
	node, suite := conformanceSuite(t)
	for _, era := range []struct {
		name      string
		stateless bool
	}{{"stateless-upstream", true}, {"legacy-upstream", false}} {
		t.Run(era.name, func(t *testing.T) {
			t.Parallel()
			up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: era.stateless, Conformance: true}))
			t.Cleanup(up.Close)
			rules := filepath.Join(t.TempDir(), "rules.json")
			if err := os.WriteFile(rules, []byte(testupstream.ConformancePolicy), 0o600); err != nil {
				t.Fatal(err)
			}
			g := startGateway(t, up.URL+"/mcp", append(slices.Clone(testupstream.ConformanceFlags), "--policy", rules)...)
			for _, sc := range conformanceScenarios {
				t.Run(sc, func(t *testing.T) {
					t.Parallel()
					checks := runConformance(t, node, suite, g.URL, sc)
					passed := 0
					for _, c := range checks {
						switch c.Status {
						case "FAILURE":
							t.Errorf("%s: %s", c.ID, c.ErrorMessage)
						case "SUCCESS":
							passed++
						}
					}
					if passed == 0 || !strings.HasPrefix(sc, "tasks-") {
						t.Errorf("%s: %d checks passed of %d", sc, passed, len(checks))
					}
				})
			}
		})
	}
}
