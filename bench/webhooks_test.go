package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for bench in the "whreceiver"
// role: -mode webhooks starts its receivers by re-executing itself
// (os.Executable), which under go test is this binary.
func TestMain(m *testing.M) {
	if a := os.Args; len(a) == 7 && a[1] == "-role" && a[2] == "whreceiver" && a[3] == "-listen" && a[5] == "-target" {
		if err := serveReceiver(a[4], a[6]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestWebhooksMode runs -mode webhooks briefly (one short round) so it
// cannot rot: three taskgates, three redis-servers, two receivers, and a
// report with each target's row, real deliveries and the on/off ratios.
func TestWebhooksMode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds taskgate and starts redis-server: not with -short")
	}
	t.Chdir("..") // the mode builds ./cmd/taskgate from the repository root
	o := options{mode: "webhooks", duration: 300 * time.Millisecond, rounds: 1, concurrency: 4,
		latencyReqs: 100, createReqs: 50, tasks: 2,
		set: map[string]bool{"duration": true, "latency-requests": true, "create-requests": true}}
	report, err := modes["webhooks"](o)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| " + whOff + " |", "| " + whFail + " |", "| " + whSlow + " |",
		whFail + " / off: create p50 at c=1 **", whSlow + " / off, every quantile: create p50 c=1 ",
		"Reproduce: `go run ./bench -mode webhooks"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	// Both receivers got deliveries; the failing one's were all retried,
	// none delivered: the mode measured webhook work, not an idle
	// dispatcher.
	fail, slow := deliveriesCell(t, report, whFail), deliveriesCell(t, report, whSlow)
	if fail[0] == 0 || fail[1] != 0 || fail[2] == 0 {
		t.Errorf("%s: got / delivered / retried / dead %v, want got > 0, none delivered, some retried", whFail, fail)
	}
	if slow[0] == 0 {
		t.Errorf("%s: got / delivered / retried / dead %v, want got > 0", whSlow, slow)
	}
}

// deliveriesCell is the last cell of target's row: received / delivered /
// retried / dead.
func deliveriesCell(t *testing.T, report, target string) [4]int {
	t.Helper()
	var n [4]int
	for _, l := range strings.Split(report, "\n") {
		if !strings.HasPrefix(l, "| "+target+" |") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if _, err := fmt.Sscanf(cells[len(cells)-1], "%d / %d / %d / %d", &n[0], &n[1], &n[2], &n[3]); err != nil {
			t.Fatalf("%s: deliveries cell %q: %v", target, cells[len(cells)-1], err)
		}
		return n
	}
	t.Fatalf("no row for %s:\n%s", target, report)
	return n
}

// TestWebhookCounts reads the failing receiver's retries from taskgate's
// metrics, as the report does.
func TestWebhookCounts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("# HELP taskgate_webhook_deliveries_total x\n" +
			`taskgate_webhook_deliveries_total{endpoint="default",event="task.created",outcome="retried"} 7` + "\n" +
			`taskgate_webhook_deliveries_total{endpoint="default",event="task.completed",outcome="retried"} 5` + "\n" +
			`taskgate_webhook_deliveries_total{endpoint="default",event="task.completed",outcome="dead"} 1e+00` + "\n" +
			`taskgate_webhook_delivery_seconds_count{endpoint="default"} 13` + "\n"))
	}))
	defer srv.Close()
	got, err := deliveryOutcomes(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got["retried"] != 12 || got["dead"] != 1 || got["delivered"] != 0 || len(got) != 2 {
		t.Fatalf("outcomes %v, want retried 12, dead 1", got)
	}
}

// TestReceiver answers as its -target says and counts what it got.
func TestReceiver(t *testing.T) {
	for _, bad := range []string{"", "200", "-1s", "soon"} {
		if _, err := parseReceiverAnswer(bad); err == nil {
			t.Errorf("-target %q: no error", bad)
		}
	}
	for _, tc := range []struct {
		target string
		status int
	}{{"500", http.StatusInternalServerError}, {"10ms", http.StatusNoContent}} {
		a, err := parseReceiverAnswer(tc.target)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(receiverHandler(a))
		for i := 0; i < 2; i++ {
			resp, err := http.Post(srv.URL+"/hook", "application/json", strings.NewReader(`{"type":"task.created"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("-target %s: HTTP %d, want %d", tc.target, resp.StatusCode, tc.status)
			}
		}
		n, err := receiverPosts(strings.TrimPrefix(srv.URL, "http://"))
		srv.Close()
		if err != nil || n != 2 {
			t.Errorf("-target %s: posts %d (%v), want 2", tc.target, n, err)
		}
	}
}
