package main

import (
	"bytes"
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// publishStats puts what two replicas learned into a fresh Redis and
// returns its URL.
func publishStats(t *testing.T) string {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	store := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { store.Close() })
	learned := map[string]map[string][]time.Duration{
		"r1": {"slow": repeat(3*time.Second, 40), "echo": repeat(5*time.Millisecond, 50), "fail": repeat(2500*time.Millisecond, 20)},
		"r2": {"slow": repeat(3200*time.Millisecond, 10), "progress": repeat(400*time.Millisecond, 30)},
	}
	for replica, tools := range learned {
		hists := map[string][]byte{}
		for tool, ds := range tools {
			var h policy.Histogram
			for _, d := range ds {
				h.Observe(d)
			}
			hists[tool], _ = h.MarshalBinary()
		}
		if err := store.PublishLatencies(context.Background(), replica, hists, gateway.LatencyKeep); err != nil {
			t.Fatal(err)
		}
	}
	return "redis://" + mr.Addr()
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestToolsGolden runs `taskgate tools` against the test upstream: the
// rule flags, a rules file (with an annotation condition) and, with
// --redis-url, the latencies two replicas published.
func TestToolsGolden(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	redisURL := publishStats(t)
	base := []string{"taskgate", "tools", "--upstream", up.URL + "/mcp",
		"--task-required", "rpcerror", "--sync", "progress", "--no-rerun", "echo", "--policy", "testdata/tools-policy.json"}
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"tools.golden", nil},
		{"tools-stats.golden", []string{"--redis-url", redisURL}},
		{"tools-stats.json.golden", []string{"--redis-url", redisURL, "--json"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := run(append(append([]string{}, base...), tt.args...), &out, &errOut); err != nil {
				t.Fatalf("taskgate tools: %v\nstderr:\n%s", err, errOut.String())
			}
			golden(t, tt.golden, out.Bytes())
			// Progress goes to stderr, never into the table.
			if !strings.Contains(errOut.String(), "8 tools") {
				t.Errorf("stderr = %q", errOut.String())
			}
			if tt.args != nil && !strings.Contains(errOut.String(), "learned latencies of 4 tools") {
				t.Errorf("stderr = %q", errOut.String())
			}
		})
	}
}

func TestToolsErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"tools"}, "missing --upstream"},
		{[]string{"tools", "--upstream", "http://127.0.0.1:1/mcp"}, "cannot list the tools of http://127.0.0.1:1/mcp"},
		{[]string{"tools", "--upstream", "http://x/mcp", "--header", "nocolon"}, "invalid --header"},
		{[]string{"tools", "--upstream", "http://x/mcp", "--policy", "testdata/missing.json"}, "cannot read --policy"},
	} {
		var out, errOut bytes.Buffer
		err := run(append([]string{"taskgate"}, tt.args...), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
		if out.Len() > 0 {
			t.Errorf("%v: printed %q to stdout", tt.args, out.String())
		}
	}
}

// TestToolsNative: a tool the upstream declares taskSupport for is shown
// native, and why; a rule naming it shows the gateway holding the
// upstream's task; an auto rule leaves it native.
func TestToolsNative(t *testing.T) {
	var list []listedTool
	for _, name := range []string{"research", "deploy", "plain", "scan"} {
		l := listedTool{Name: name}
		if name != "plain" {
			l.Execution.TaskSupport = policy.TaskSupportRequired
		}
		list = append(list, l)
	}
	rule, err := policy.NewRule("deploy", policy.Sync)
	if err != nil {
		t.Fatal(err)
	}
	auto, err := policy.NewRule("scan", policy.Auto)
	if err != nil {
		t.Fatal(err)
	}
	rows := decideTools(&policy.Config{Rules: policy.Rules{rule, auto}}, list, nil, time.Hour)
	want := map[string]string{"research": "native", "deploy": "gateway+native", "plain": "gateway", "scan": "native"}
	for _, r := range rows {
		if r.Tasks != want[r.Tool] {
			t.Errorf("%s: tasks %q, want %q (%s)", r.Tool, r.Tasks, want[r.Tool], r.Reason)
		}
	}
	if r := rows[0]; r.Legacy != "required" || !strings.HasPrefix(r.Reason, `native: the upstream declares taskSupport "required"`) {
		t.Errorf("research: %+v", r)
	}
	if r := rows[1]; r.Legacy != "none" || !strings.Contains(r.Reason, "a rule takes it over") {
		t.Errorf("deploy: %+v", r)
	}
	var b bytes.Buffer
	if err := printTools(&b, rows, false); err != nil || !strings.Contains(b.String(), "gateway+native") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
}
