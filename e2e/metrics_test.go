package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// metricsText GETs url and returns the exposition text.
func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d %.200s", url, resp.StatusCode, b)
	}
	return string(b)
}

// sample is the value of the series line that starts with series (name
// and labels exactly as exposed), or -1.
func sample(text, series string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

// TestMetricsEndpoint: the built binary serves /metrics on --listen by
// default and on --metrics-listen when set, and counts a task's life.
func TestMetricsEndpoint(t *testing.T) {
	up := newUpstream(t, testupstream.Options{Stateless: true})
	g := startGateway(t, up, "--task", "echo")
	c := newMClient(t, []string{g.URL}, "Bearer metrics", true)
	tk := c.createTask(0, "echo", map[string]any{"text": "counted"})
	c.waitStatus(0, tk.TaskID, "completed")

	// The worker counts the task once its outcome is written and its lease
	// released: a moment after a poll can see it completed.
	want := map[string]float64{
		`taskgate_tasks_created_total{flavour="modern",tool="echo"}`:           1,
		`taskgate_tasks_finished_total{status="completed",tool="echo"}`:        1,
		`taskgate_task_duration_seconds_count{status="completed",tool="echo"}`: 1,
		`taskgate_tasks_live{status="working"}`:                                0,
		`taskgate_held_calls`:                                                  0,
		`taskgate_leases_recovered_total`:                                      0,
	}
	var text string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		text = metricsText(t, g.base+"/metrics")
		wrong := 0
		for series, v := range want {
			if sample(text, series) != v {
				wrong++
			}
		}
		if wrong == 0 || time.Now().After(deadline) {
			break
		}
	}
	for series, v := range want {
		if got := sample(text, series); got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
	if !strings.Contains(text, `taskgate_store_command_duration_seconds_count{command="evalsha"}`) {
		t.Error("no store command observed")
	}

	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	g2 := startGateway(t, up, "--metrics-listen", addr)
	if !strings.Contains(metricsText(t, "http://"+addr+"/metrics"), "taskgate_held_calls") {
		t.Error("--metrics-listen serves no taskgate metrics")
	}
	resp, err := http.Get(g2.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics on --listen with --metrics-listen set: HTTP %d, want 404", resp.StatusCode)
	}
}
