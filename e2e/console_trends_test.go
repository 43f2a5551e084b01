package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/taskstore"
)

// TestConsoleTrendsBrowser: a mixed run through the built binary on a
// redis-server — tasks that complete, fail (a JSON-RPC error), are
// cancelled, wait for their client's answer, and one run again after the
// upstream restarts (--rerun) — then the console's trends in headless
// Chromium: every point of the charts shows what the store holds for it,
// overall and for one tool, and the tools page's histogram the store's
// durations. With UPDATE_SCREENSHOTS=1 it saves docs/console-trends.png
// and docs/console-tools.png.
func TestConsoleTrendsBrowser(t *testing.T) {
	browser := chromium(t)
	t.Parallel()
	rec := &testupstream.Recorder{}
	up := newStoppableHTTP(t, func() http.Handler { return testupstream.Handler(testupstream.Options{Recorder: rec}) })
	raddr := redistest.Start(t)
	caddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, "http://"+up.addr+"/mcp", durableArgs(raddr, "--task", "slow", "--task", "rpcerror", "--task", "elicit",
		"--rerun", "slow", "--max-attempts", "6", "--console-listen", caddr)...)
	console := "http://" + caddr
	c := newMClient(t, []string{gw.URL}, "Bearer trends-client", true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The run: 3 completed, 2 failed, 1 cancelled, 1 answered, 1 rerun.
	var ids []string
	for i := range 3 {
		ids = append(ids, c.createTask(0, "slow", map[string]any{"seconds": 0.05 * float64(i+1), "text": "ok"}).TaskID)
	}
	for range 2 {
		ids = append(ids, c.createTask(0, "rpcerror", map[string]any{}).TaskID)
	}
	for _, id := range ids {
		c.waitTask(0, id, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	}
	long := c.createTask(0, "slow", map[string]any{"seconds": 30.0, "text": "cancelled"}).TaskID
	c.cancel(0, long)
	c.waitStatus(0, long, "cancelled")
	asks := c.createTask(0, "elicit", map[string]any{}).TaskID
	ir, _ := c.waitStatus(0, asks, "input_required")
	for k := range ir.InputRequests {
		c.update(0, asks, map[string]any{k: accept("name", "Ada")})
	}
	c.waitStatus(0, asks, "completed")
	again := c.createTask(0, "slow", map[string]any{"seconds": 1.5, "text": "survives"}).TaskID
	if err := rec.WaitFor(ctx, "slow", testupstream.Called, 5); err != nil {
		t.Fatal(err)
	}
	up.stop()
	time.Sleep(300 * time.Millisecond)
	up.start(t)
	if got, seen := c.waitTask(0, again, "terminal", func(tk mTask) bool { return terminal(tk.Status) }); got.Status != "completed" {
		t.Fatalf("the rerunnable task ended %s %q (%v)", got.Status, got.StatusMessage, seen)
	}

	// The store holds the run once the replica has flushed (every 5 s).
	rdb := redis.NewClient(&redis.Options{Addr: raddr})
	t.Cleanup(func() { rdb.Close() })
	st := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { st.Close() })
	total := func(tool string, span taskstore.TrendSpan) (taskstore.TrendCounts, []taskstore.TrendPoint) {
		ps, err := st.Trend(ctx, tool, span)
		if err != nil {
			t.Fatal(err)
		}
		var sum taskstore.TrendCounts
		for i := range ps {
			sum.Add(&ps[i].TrendCounts)
		}
		return sum, ps
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		sum, _ := total("", taskstore.TrendLastHour)
		if sum.Started == 8 && sum.Completed == 5 && sum.Failed == 2 && sum.Cancelled == 1 && sum.Reruns >= 1 && sum.Waits >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store's trends after the run: %+v; want 8 started, 5 completed, 2 failed, 1 cancelled, reruns and a wait", sum)
		}
		time.Sleep(500 * time.Millisecond)
	}

	bctx, closeBrowser := startChromium(ctx, browser, 1100, 900)
	defer closeBrowser()
	shoot := screenshotter(t, bctx)
	// points reads a chart's points as the browser has them: start →
	// the data-* attributes named.
	points := func(chart string, attrs ...string) map[string][]string {
		t.Helper()
		js := fmt.Sprintf(`Array.from(document.querySelectorAll('figure.%s g.pt')).map(g => [g.dataset.start, %s])`, chart,
			func() string {
				s := ""
				for i, a := range attrs {
					if i > 0 {
						s += ", "
					}
					s += "g.getAttribute('data-" + a + "')"
				}
				return s
			}())
		rows, err := chromedp.Run(bctx, chromedp.Evaluate[[][]string](js))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, r := range rows {
			out[r[0]] = r[1:]
		}
		return out
	}
	// check compares the page's charts with the store's points: every
	// point the page draws that the store has (the minute may turn
	// between the two reads) shows the store's figures.
	check := func(tool string, span taskstore.TrendSpan) {
		t.Helper()
		_, ps := total(tool, span)
		counts := points("counts", "started", "completed", "failed", "cancelled")
		reruns := points("reruns", "reruns")
		durs := points("durations", "count", "p50-ms", "p95-ms")
		waits := points("waits", "count")
		if len(counts) != span.Points() || len(reruns) != span.Points() || len(durs) != span.Points() || len(waits) != span.Points() {
			t.Fatalf("%q %s: the page draws %d, %d, %d, %d points, want %d", tool, span, len(counts), len(reruns), len(durs), len(waits), span.Points())
		}
		matched := 0
		for _, p := range ps {
			at := p.Start.Format(time.RFC3339)
			got, ok := counts[at]
			if !ok {
				continue
			}
			matched++
			n := func(v int64) string { return strconv.FormatInt(v, 10) }
			if !slices.Equal(got, []string{n(p.Started), n(p.Completed), n(p.Failed), n(p.Cancelled)}) {
				t.Errorf("%q %s at %s: the chart shows started, completed, failed, cancelled %v; the store holds %+v", tool, span, at, got, p.TrendCounts)
			}
			if reruns[at][0] != n(p.Reruns) || waits[at][0] != n(p.Waits) || durs[at][0] != n(p.Duration.Total()) {
				t.Errorf("%q %s at %s: reruns %v, waits %v, durations %v; the store holds %+v", tool, span, at, reruns[at], waits[at], durs[at], p.TrendCounts)
			}
		}
		if matched < span.Points()-1 {
			t.Errorf("%q %s: only %d of the page's points are the store's", tool, span, matched)
		}
	}

	// Trends, from the nav link: every tool over the last hour.
	if err := chromedp.Do(bctx, chromedp.Navigate(console+"/"), chromedp.WaitVisible(chromedp.CSS(`nav a[href="/trends"]`)),
		chromedp.Click(chromedp.CSS(`nav a[href="/trends"]`)), chromedp.WaitVisible(chromedp.CSS("figure.counts svg"))); err != nil {
		t.Fatal(err)
	}
	check("", taskstore.TrendLastHour)
	totals, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(document.querySelectorAll('td[data-total]')).map(td => [td.dataset.total, td.textContent]))`))
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := total("", taskstore.TrendLastHour)
	for k, v := range map[string]int64{"started": sum.Started, "completed": sum.Completed, "failed": sum.Failed, "cancelled": sum.Cancelled, "reruns": sum.Reruns, "waits": sum.Waits} {
		if totals[k] != strconv.FormatInt(v, 10) {
			t.Errorf("the page's total %s is %q, the store's %d", k, totals[k], v)
		}
	}
	shoot("console-trends.png")
	// One tool, from its link; then the day.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`nav[aria-label="tool"] a[href="/trends?tool=slow"]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="tool"] a[aria-current][href="/trends?tool=slow"]`))); err != nil {
		t.Fatal(err)
	}
	check("slow", taskstore.TrendLastHour)
	if s, _ := total("slow", taskstore.TrendLastHour); s.Started != 5 || s.Reruns < 1 || s.Cancelled != 1 {
		t.Errorf("slow's trends: %+v, want 5 started, 1 cancelled, reruns", s)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(console+"/trends?span=day"), chromedp.WaitVisible(chromedp.CSS("figure.counts svg"))); err != nil {
		t.Fatal(err)
	}
	check("", taskstore.TrendLastDay)

	// The tools page: each tool's recent durations, the store's.
	if err := chromedp.Do(bctx, chromedp.Navigate(console+"/tools"), chromedp.WaitVisible(chromedp.CSS("svg.spark"))); err != nil {
		t.Fatal(err)
	}
	sparks, err := chromedp.Run(bctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll('tbody tr')).filter(tr => tr.querySelector('svg.spark')).map(tr => [tr.cells[0].textContent, tr.querySelector('svg.spark').dataset.total])`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range sparks {
		names = append(names, s[0])
	}
	hs, err := st.TrendDurations(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, s := range sparks {
		h := hs[s[0]]
		if s[1] != strconv.FormatInt(h.Total(), 10) {
			t.Errorf("the tools page shows %s tasks of %s; the store holds %d", s[1], s[0], h.Total())
		}
		if s[0] == "slow" || s[0] == "rpcerror" {
			found++
		}
	}
	if found != 2 || hs["slow"].Total() != 4 || hs["rpcerror"].Total() != 2 {
		t.Errorf("tools page rows %v; durations slow %d, rpcerror %d: want 4 and 2", sparks, hs["slow"].Total(), hs["rpcerror"].Total())
	}
	shoot("console-tools.png")
}
