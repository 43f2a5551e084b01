package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/taskgate/taskgate/taskstore"
)

// evilTool is a tool name a client may send: markup and both quotes.
const evilTool = `<script>alert("x")</script>'`

// trendNow is the trend tests' store clock: fixed, so that no minute
// turns between writing figures and reading them back.
var trendNow = time.Now().Truncate(time.Minute).Add(30 * time.Second)

// newTrendFixture is newFixture with the store on trendNow.
func newTrendFixture(t testing.TB, tok string, cfg func(*Config)) *fixture {
	t.Helper()
	return openFixture(t, taskstore.Options{Clock: func() time.Time { return trendNow }}, Config{Token: tok}, cfg)
}

// seedTrends writes figures as replicas' flushes would: for tool and
// for "search", this minute and five minutes ago, and the overall series.
func seedTrends(t testing.TB, st *taskstore.Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.AdmitTrendTools(ctx, []string{evilTool, "search"}, 50); err != nil {
		t.Fatal(err)
	}
	now := trendNow.Unix() / 60
	mk := func(s, c, f, x, r int64, durs ...time.Duration) taskstore.TrendCounts {
		tc := taskstore.TrendCounts{Started: s, Completed: c, Failed: f, Cancelled: x, Reruns: r}
		for _, d := range durs {
			tc.Duration[taskstore.TrendBucket(d)]++
		}
		tc.Waits, tc.WaitHist[taskstore.TrendBucket(4*time.Second)] = 1, 1
		return tc
	}
	a := mk(4, 2, 1, 1, 1, 30*time.Millisecond, 2*time.Second, 3*time.Second)
	b := mk(2, 1, 0, 0, 0, 70*time.Second)
	var all1, all2 taskstore.TrendCounts
	all1.Add(&a)
	all1.Add(&b)
	all2.Add(&b)
	if err := st.AddTrends(ctx, "seed", []taskstore.TrendDelta{
		{Minute: now, Tool: evilTool, Counts: a}, {Minute: now, Tool: "search", Counts: b}, {Minute: now, Counts: all1},
		{Minute: now - 5, Tool: "search", Counts: b}, {Minute: now - 5, Counts: all2},
	}); err != nil {
		t.Fatal(err)
	}
}

// elements are the attributes of every element of body that tag names
// and whose class holds class, inside an element whose class holds
// within ("" for anywhere).
func elements(t testing.TB, body, within, tag, class string) []map[string]string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hasClass := func(n *html.Node, c string) bool {
		for _, a := range n.Attr {
			if a.Key == "class" && strings.Contains(" "+a.Val+" ", " "+c+" ") {
				return true
			}
		}
		return false
	}
	var out []map[string]string
	var walk func(n *html.Node, in bool)
	walk = func(n *html.Node, in bool) {
		if n.Type == html.ElementNode {
			if within != "" && hasClass(n, within) {
				in = true
			}
			if in && n.Data == tag && hasClass(n, class) {
				m := map[string]string{}
				for _, a := range n.Attr {
					m[a.Key] = a.Val
				}
				if tn := n.FirstChild; tn != nil && tn.Data == "title" && tn.FirstChild != nil {
					m["title"] = tn.FirstChild.Data
				}
				out = append(out, m)
			}
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch, in)
		}
	}
	walk(doc, within == "")
	return out
}

func qattr(q taskstore.Quantile) string { return quantileAttr(q) }

// TestTrendsPage: every point of every chart says (in its data-*
// attributes and its <title>) the figures the store holds for it, for
// every tool and overall, over the hour and the day; the totals too; a
// tool name with markup and quotes is escaped everywhere.
func TestTrendsPage(t *testing.T) {
	f := newTrendFixture(t, token, nil)
	seedTrends(t, f.store)
	ctx := context.Background()
	for _, c := range []struct{ tool, span string }{{"", "hour"}, {"", "day"}, {"search", "hour"}, {evilTool, "hour"}, {evilTool, "day"}, {"never-called", "hour"}} {
		q := url.Values{"tool": {c.tool}, "span": {c.span}}
		resp, body := f.do("GET", "/trends?"+q.Encode(), "Bearer "+token, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%v: %d %s", q, resp.StatusCode, body)
		}
		if strings.Contains(body, "<script") || strings.Contains(body, `alert("x")`) {
			t.Fatalf("%v: the tool name is not escaped:\n%s", q, body)
		}
		span, _ := taskstore.ParseTrendSpan(c.span)
		want, err := f.store.Trend(ctx, c.tool, span)
		if err != nil {
			t.Fatal(err)
		}
		counts := elements(t, body, "counts", "g", "pt")
		durs := elements(t, body, "durations", "g", "pt")
		waits := elements(t, body, "waits", "g", "pt")
		reruns := elements(t, body, "reruns", "g", "pt")
		if len(counts) != span.Points() || len(durs) != span.Points() || len(waits) != span.Points() || len(reruns) != span.Points() {
			t.Fatalf("%v: %d, %d, %d, %d points, want %d each", q, len(counts), len(durs), len(waits), len(reruns), span.Points())
		}
		var total taskstore.TrendCounts
		for i, p := range want {
			total.Add(&p.TrendCounts)
			g := counts[i]
			if g["data-start"] != p.Start.Format(time.RFC3339) || g["data-started"] != strconv.FormatInt(p.Started, 10) ||
				g["data-completed"] != strconv.FormatInt(p.Completed, 10) || g["data-failed"] != strconv.FormatInt(p.Failed, 10) ||
				g["data-cancelled"] != strconv.FormatInt(p.Cancelled, 10) {
				t.Errorf("%v point %d: chart %v, store %+v", q, i, g, p)
			}
			if !strings.Contains(g["title"], "started "+strconv.FormatInt(p.Started, 10)+", completed "+strconv.FormatInt(p.Completed, 10)) {
				t.Errorf("%v point %d: title %q", q, i, g["title"])
			}
			if d := durs[i]; d["data-count"] != strconv.FormatInt(p.Duration.Total(), 10) || d["data-p50-ms"] != qattr(p.Duration.Quantile(.5)) || d["data-p95-ms"] != qattr(p.Duration.Quantile(.95)) {
				t.Errorf("%v point %d: durations %v, store %v", q, i, d, p.Duration)
			}
			if w := waits[i]; w["data-count"] != strconv.FormatInt(p.WaitHist.Total(), 10) || w["data-p95-ms"] != qattr(p.WaitHist.Quantile(.95)) {
				t.Errorf("%v point %d: waits %v, store %v", q, i, w, p.WaitHist)
			}
			if r := reruns[i]; r["data-reruns"] != strconv.FormatInt(p.Reruns, 10) {
				t.Errorf("%v point %d: reruns %v, store %d", q, i, r, p.Reruns)
			}
		}
		for k, v := range map[string]int64{"started": total.Started, "completed": total.Completed, "failed": total.Failed, "cancelled": total.Cancelled, "reruns": total.Reruns, "waits": total.Waits} {
			if !strings.Contains(body, `data-total="`+k+`">`+strconv.FormatInt(v, 10)+`</td>`) {
				t.Errorf("%v: the totals lack %s = %d", q, k, v)
			}
		}
		hist := elements(t, body, "distribution", "g", "bkt")
		if len(hist) != taskstore.TrendBucketCount {
			t.Fatalf("%v: %d histogram buckets", q, len(hist))
		}
		for i, b := range hist {
			if b["data-count"] != strconv.FormatInt(total.Duration[i], 10) {
				t.Errorf("%v: bucket %d shows %s, the store %d", q, i, b["data-count"], total.Duration[i])
			}
		}
		if c.tool == "" && c.span == "hour" {
			if total.Started != 8 || total.Completed != 4 {
				t.Fatalf("the seed is not what the store holds: %+v", total)
			}
			// The tool links: escaped, and each leads to that tool's page.
			if !strings.Contains(body, `href="/trends?tool=`+url.QueryEscape(evilTool)+`"`) && !strings.Contains(body, "&lt;script&gt;") {
				t.Errorf("no escaped link to the evil tool's trends:\n%s", body)
			}
		}
		if c.tool == "never-called" && !strings.Contains(body, `id="no-trends"`) {
			t.Errorf("a tool without figures does not say so")
		}
	}
}

// TestTrendsBadQuery: a span that is none, or a tool name longer than
// any the store keeps, is a 400 saying what is wanted.
func TestTrendsBadQuery(t *testing.T) {
	f := newTrendFixture(t, token, nil)
	for q, want := range map[string]string{
		"span=week":                               "span: want hour or day",
		"tool=" + strings.Repeat("x", 129):        "tool: at most 128 bytes",
		"span=hour&tool=" + url.QueryEscape("ok"): "",
	} {
		resp, body := f.do("GET", "/trends?"+q, "Bearer "+token, nil)
		if want == "" {
			if resp.StatusCode != 200 {
				t.Errorf("%s: %d", q, resp.StatusCode)
			}
			continue
		}
		if resp.StatusCode != 400 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want 400 %q", q, resp.StatusCode, body, want)
		}
	}
	if resp, _ := f.do("GET", "/trends", "", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("/trends without credentials: %d, want the login redirect", resp.StatusCode)
	}
}

// TestToolsPageDurations: each tool's row shows its recent duration
// histogram, bucket by bucket what the store holds, next to its decision.
func TestToolsPageDurations(t *testing.T) {
	f := newTrendFixture(t, token, func(c *Config) {
		c.Tools = func(context.Context) ([]ToolRow, error) {
			return []ToolRow{{Tool: evilTool, Legacy: "optional", Modern: "task", Tasks: "yes"}, {Tool: "search", Legacy: "forbidden"}, {Tool: "quiet"}}, nil
		}
	})
	seedTrends(t, f.store)
	resp, body := f.do("GET", "/tools", "Bearer "+token, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if strings.Contains(body, "<script") {
		t.Fatalf("the tool name is not escaped:\n%s", body)
	}
	want, err := f.store.TrendDurations(context.Background(), []string{evilTool, "search", "quiet"})
	if err != nil {
		t.Fatal(err)
	}
	sparks := elements(t, body, "", "svg", "spark")
	if len(sparks) != 3 {
		t.Fatalf("%d sparklines, want one per tool", len(sparks))
	}
	buckets := elements(t, body, "spark", "g", "bkt")
	for i, tool := range []string{evilTool, "search", "quiet"} {
		h := want[tool]
		if sparks[i]["data-total"] != strconv.FormatInt(h.Total(), 10) || sparks[i]["data-p95-ms"] != qattr(h.Quantile(.95)) {
			t.Errorf("%s: sparkline %v, store %v", tool, sparks[i], h)
		}
		for j := range taskstore.TrendBucketCount {
			if b := buckets[i*taskstore.TrendBucketCount+j]; b["data-count"] != strconv.FormatInt(h[j], 10) {
				t.Errorf("%s bucket %d: %s, store %d", tool, j, b["data-count"], h[j])
			}
		}
	}
	if want["search"].Total() != 2 || want[evilTool].Total() != 3 {
		t.Fatalf("the seed: %v", want)
	}
}

// FuzzTrendsQuery: any tool and span on /trends is a page or a 400,
// never a 500 or markup from the query.
func FuzzTrendsQuery(f *testing.F) {
	f.Add("search", "hour")
	f.Add(evilTool, "day")
	f.Add("", "week")
	f.Add("\x00\xff{}", "")
	tf := newTrendFixture(f, "", nil)
	seedTrends(f, tf.store)
	f.Fuzz(func(t *testing.T, tool, span string) {
		req := httptest.NewRequest("GET", "http://127.0.0.1:9090/trends?"+url.Values{"tool": {tool}, "span": {span}}.Encode(), nil)
		w := httptest.NewRecorder()
		tf.con.ServeHTTP(w, req)
		if w.Code != 200 && w.Code != 400 {
			t.Fatalf("tool %q span %q: %d %s", tool, span, w.Code, w.Body)
		}
		if strings.Contains(w.Body.String(), "<script") {
			t.Fatalf("tool %q rendered markup:\n%s", tool, w.Body)
		}
	})
}
