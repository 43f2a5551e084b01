package console

// The trends page (/trends) and the tools page's duration histograms:
// the store's per-minute figures of tasks (taskstore/trends.go), drawn
// here as inline SVG, server-side, with no script. Every figure a chart
// draws is also in its data-* attributes and its <title>, so a reader
// (or a test) gets the numbers and not only the shapes. Tool names are
// client input: every text goes through html.EscapeString (attributes
// and text alike), the page's own through html/template.

import (
	"context"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// TrendStore is what the trends read (taskstore.Store).
type TrendStore interface {
	Trend(ctx context.Context, tool string, span taskstore.TrendSpan) ([]taskstore.TrendPoint, error)
	TrendTools(ctx context.Context) ([]string, error)
	TrendDurations(ctx context.Context, tools []string) (map[string]taskstore.Histogram, error)
}

// maxTrendQuery bounds the tool a /trends URL may name: no tool name the
// store keeps is longer (taskstore.MaxTrendToolName).
const maxTrendQuery = taskstore.MaxTrendToolName

// trendsView is the trends page's data.
type trendsView struct {
	Tool   string // "" for every tool
	Span   taskstore.TrendSpan
	Tools  []string
	Total  taskstore.TrendCounts
	P50    string
	P95    string
	WaitP5 string
	WaitP9 string
	Charts []template.HTML
	Hist   template.HTML
	Empty  bool
}

func (c *Console) trends(w http.ResponseWriter, r *http.Request, _ string) {
	q := r.URL.Query()
	span, err := taskstore.ParseTrendSpan(q.Get("span"))
	if err != nil {
		http.Error(w, "span: want hour or day", http.StatusBadRequest)
		return
	}
	tool := q.Get("tool")
	if len(tool) > maxTrendQuery {
		http.Error(w, fmt.Sprintf("tool: at most %d bytes", maxTrendQuery), http.StatusBadRequest)
		return
	}
	points, err := c.cfg.Store.Trend(r.Context(), tool, span)
	if err != nil {
		c.storeError(w, err)
		return
	}
	tools, err := c.cfg.Store.TrendTools(r.Context())
	if err != nil {
		c.storeError(w, err)
		return
	}
	v := trendsView{Tool: tool, Span: span, Tools: tools}
	for i := range points {
		v.Total.Add(&points[i].TrendCounts)
	}
	v.Empty = v.Total.IsZero()
	v.P50, v.P95 = quantileText(v.Total.Duration.Quantile(.5)), quantileText(v.Total.Duration.Quantile(.95))
	v.WaitP5, v.WaitP9 = quantileText(v.Total.WaitHist.Quantile(.5)), quantileText(v.Total.WaitHist.Quantile(.95))
	per := "minute"
	if span == taskstore.TrendLastDay {
		per = "hour"
	}
	v.Charts = []template.HTML{
		countsChart(points, per),
		quantileChart(points, "durations", "Duration (creation → completed or failed), p50 and p95", func(p *taskstore.TrendPoint) taskstore.Histogram { return p.Duration }, per),
		quantileChart(points, "waits", "Time waiting for input (input_required → working), p50 and p95", func(p *taskstore.TrendPoint) taskstore.Histogram { return p.WaitHist }, per),
		rerunsChart(points, per),
	}
	v.Hist = histogramChart(v.Total.Duration, 640, 120, "distribution", "Durations over the window, per bucket")
	c.render(w, http.StatusOK, "trends", map[string]any{"V": v, "Overall": tool == ""})
}

// trendsLink is the trends page of tool over span.
func trendsLink(tool string, span taskstore.TrendSpan) string {
	v := url.Values{}
	if tool != "" {
		v.Set("tool", tool)
	}
	if span == taskstore.TrendLastDay {
		v.Set("span", string(span))
	}
	if len(v) == 0 {
		return "/trends"
	}
	return "/trends?" + v.Encode()
}

// msText says a bucket bound: 50 ms, 2 s, 5000 s (every bound from a
// second on is whole seconds).
func msText(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return strconv.FormatInt(ms/1000, 10) + " s"
}

// quantileText says a quantile at bucket resolution: "≤ 50 ms", "> 5000
// s", or "–" with nothing counted.
func quantileText(q taskstore.Quantile) string {
	switch {
	case !q.OK:
		return "–"
	case q.Above:
		return "> " + msText(q.Ms)
	}
	return "≤ " + msText(q.Ms)
}

// quantileAttr is a quantile for a data-* attribute: its ms, ">ms"
// above the last bound, "" with nothing counted.
func quantileAttr(q taskstore.Quantile) string {
	switch {
	case !q.OK:
		return ""
	case q.Above:
		return ">" + strconv.FormatInt(q.Ms, 10)
	}
	return strconv.FormatInt(q.Ms, 10)
}

// The charts' frame: a plot area inside margins for the axes' labels.
const (
	chartW, chartH         = 760, 220
	plotL, plotR           = 72, 12
	plotT, plotB           = 14, 40
	plotWidth, plotHeight  = chartW - plotL - plotR, chartH - plotT - plotB
	sparkW, sparkH, sparkG = 88, 22, 1
)

type svgBuf struct{ strings.Builder }

func (b *svgBuf) f(format string, args ...any) { fmt.Fprintf(&b.Builder, format, args...) }

// esc escapes s for an SVG text or attribute.
func esc(s string) string { return html.EscapeString(s) }

func timeLabel(t time.Time, per string) string {
	if per == "hour" {
		return t.UTC().Format("Jan 2 15:04")
	}
	return t.UTC().Format("15:04")
}

// open starts a chart: its svg, its title and description, and the x
// axis (time, UTC, labels at the start, middle and end).
func openChart(b *svgBuf, class, title, yLabel string, points []taskstore.TrendPoint, per string) {
	b.f(`<figure class="chart %s"><figcaption>%s</figcaption>`, esc(class), esc(title))
	b.f(`<svg class="chart" role="img" viewBox="0 0 %d %d" width="%d" height="%d" data-points="%d" data-per="%s"><title>%s</title>`,
		chartW, chartH, chartW, chartH, len(points), esc(per), esc(title))
	b.f(`<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, plotL, plotT+plotHeight, plotL+plotWidth, plotT+plotHeight)
	b.f(`<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, plotL, plotT, plotL, plotT+plotHeight)
	if n := len(points); n > 0 {
		for _, i := range []int{0, n / 2, n - 1} {
			anchor := "middle"
			switch i {
			case 0:
				anchor = "start"
			case n - 1:
				anchor = "end"
			}
			b.f(`<text class="tick" x="%.1f" y="%d" text-anchor="%s">%s</text>`, colX(i, n)+colW(n)/2, plotT+plotHeight+14, anchor, esc(timeLabel(points[i].Start, per)))
		}
	}
	b.f(`<text class="label" x="%d" y="%d" text-anchor="middle">time (UTC), one bar per %s</text>`, plotL+plotWidth/2, chartH-4, esc(per))
	b.f(`<text class="label" transform="rotate(-90)" x="%d" y="12" text-anchor="middle">%s</text>`, -(plotT + plotHeight/2), esc(yLabel))
}

func closeChart(b *svgBuf) { b.f(`</svg></figure>`) }

func colW(n int) float64 { return float64(plotWidth) / float64(max(n, 1)) }

func colX(i, n int) float64 { return float64(plotL) + float64(i)*colW(n) }

// yCount is the plot's y of count v on a 0..top scale.
func yCount(v, top int64) float64 {
	return float64(plotT+plotHeight) - float64(v)/float64(top)*float64(plotHeight)
}

// niceTop is a round axis maximum at least v (1, 2, 5 × 10^k).
func niceTop(v int64) int64 {
	if v < 1 {
		return 1
	}
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= v {
				return m * p
			}
		}
	}
}

// countAxis draws the y axis of counts: 0, half and top, with grid lines.
func countAxis(b *svgBuf, top int64) {
	for _, v := range []int64{0, top / 2, top} {
		if v == top/2 && top < 2 {
			continue
		}
		y := yCount(v, top)
		b.f(`<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, plotL, y, plotL+plotWidth, y)
		b.f(`<text class="tick" x="%d" y="%.1f" text-anchor="end">%d</text>`, plotL-6, y+4, v)
	}
}

// countsChart: tasks ended per minute as stacked bars (completed,
// failed, cancelled) and tasks started as a line.
func countsChart(points []taskstore.TrendPoint, per string) template.HTML {
	var b svgBuf
	openChart(&b, "counts", "Tasks per "+per+": started (line), completed, failed and cancelled (bars)", "tasks per "+per, points, per)
	var top int64
	for _, p := range points {
		top = max(top, p.Started, p.Completed+p.Failed+p.Cancelled)
	}
	top = niceTop(top)
	countAxis(&b, top)
	n := len(points)
	w := colW(n)
	var line []string
	for i, p := range points {
		x := colX(i, n)
		b.f(`<g class="pt" data-start="%s" data-started="%d" data-completed="%d" data-failed="%d" data-cancelled="%d">`,
			p.Start.UTC().Format(time.RFC3339), p.Started, p.Completed, p.Failed, p.Cancelled)
		b.f(`<title>%s: started %d, completed %d, failed %d, cancelled %d</title>`, esc(timeLabel(p.Start, per)), p.Started, p.Completed, p.Failed, p.Cancelled)
		b.f(`<rect class="hit" x="%.1f" y="%d" width="%.1f" height="%d"/>`, x, plotT, w, plotHeight)
		base := int64(0)
		for _, s := range []struct {
			class string
			v     int64
		}{{"c-completed", p.Completed}, {"c-failed", p.Failed}, {"c-cancelled", p.Cancelled}} {
			if s.v == 0 {
				continue
			}
			y0, y1 := yCount(base, top), yCount(base+s.v, top)
			b.f(`<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, s.class, x+w*0.15, y1, w*0.7, y0-y1)
			base += s.v
		}
		b.f(`</g>`)
		line = append(line, fmt.Sprintf("%.1f,%.1f", x+w/2, yCount(p.Started, top)))
	}
	if len(line) > 0 {
		b.f(`<polyline class="c-started" points="%s"/>`, strings.Join(line, " "))
	}
	legend(&b, []string{"c-started", "started"}, []string{"c-completed", "completed"}, []string{"c-failed", "failed"}, []string{"c-cancelled", "cancelled"})
	closeChart(&b)
	return template.HTML(b.String())
}

// legend draws swatches and names in the top right corner.
func legend(b *svgBuf, items ...[]string) {
	x := plotL + plotWidth - 100*len(items)
	for _, it := range items {
		b.f(`<rect class="%s swatch" x="%d" y="2" width="10" height="10"/><text class="tick" x="%d" y="11">%s</text>`, it[0], x, x+14, esc(it[1]))
		x += 100
	}
}

// quantileChart: p50 and p95 of a histogram per point on a log axis
// (the bucket bounds), with the count of values in each point.
func quantileChart(points []taskstore.TrendPoint, class, title string, pick func(*taskstore.TrendPoint) taskstore.Histogram, per string) template.HTML {
	var b svgBuf
	openChart(&b, class, title+" per "+per+" (bucket resolution)", "at most (log scale)", points, per)
	levels := taskstore.TrendBucketCount // one level per bucket: bound i at i, "above" at the top
	y := func(i int) float64 {
		return float64(plotT+plotHeight) - float64(i)/float64(levels-1)*float64(plotHeight)
	}
	for i := 0; i < levels; i += 3 {
		label := msText(taskstore.TrendBounds[min(i, len(taskstore.TrendBounds)-1)])
		if i == len(taskstore.TrendBounds) {
			label = "more"
		}
		b.f(`<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, plotL, y(i), plotL+plotWidth, y(i))
		b.f(`<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`, plotL-6, y(i)+4, esc(label))
	}
	n := len(points)
	w := colW(n)
	level := func(q taskstore.Quantile) int {
		if q.Above {
			return len(taskstore.TrendBounds)
		}
		return taskstore.TrendBucket(time.Duration(q.Ms) * time.Millisecond)
	}
	// The lines first, the points (circles, and each point's hover
	// area) over them; p50 drawn smaller over p95 so both show when
	// they are the same bucket.
	var p50s, p95s []string
	qs := make([][2]taskstore.Quantile, len(points))
	for i := range points {
		h := pick(&points[i])
		qs[i] = [2]taskstore.Quantile{h.Quantile(.5), h.Quantile(.95)}
		if qs[i][0].OK {
			x := colX(i, n) + w/2
			p50s = append(p50s, fmt.Sprintf("%.1f,%.1f", x, y(level(qs[i][0]))))
			p95s = append(p95s, fmt.Sprintf("%.1f,%.1f", x, y(level(qs[i][1]))))
		}
	}
	if len(p95s) > 1 {
		b.f(`<polyline class="c-p95 l" points="%s"/><polyline class="c-p50 l" points="%s"/>`, strings.Join(p95s, " "), strings.Join(p50s, " "))
	}
	for i := range points {
		h := pick(&points[i])
		q50, q95 := qs[i][0], qs[i][1]
		x := colX(i, n) + w/2
		b.f(`<g class="pt" data-start="%s" data-count="%d" data-p50-ms="%s" data-p95-ms="%s">`, points[i].Start.UTC().Format(time.RFC3339), h.Total(), quantileAttr(q50), quantileAttr(q95))
		b.f(`<title>%s: %d, p50 %s, p95 %s</title>`, esc(timeLabel(points[i].Start, per)), h.Total(), esc(quantileText(q50)), esc(quantileText(q95)))
		b.f(`<rect class="hit" x="%.1f" y="%d" width="%.1f" height="%d"/>`, colX(i, n), plotT, w, plotHeight)
		if q50.OK {
			b.f(`<circle class="c-p95" cx="%.1f" cy="%.1f" r="3.5"/><circle class="c-p50" cx="%.1f" cy="%.1f" r="2.2"/>`, x, y(level(q95)), x, y(level(q50)))
		}
		b.f(`</g>`)
	}
	legend(&b, []string{"c-p50", "p50"}, []string{"c-p95", "p95"})
	closeChart(&b)
	return template.HTML(b.String())
}

// rerunsChart: attempts begun again per point, as bars.
func rerunsChart(points []taskstore.TrendPoint, per string) template.HTML {
	var b svgBuf
	openChart(&b, "reruns", "Reruns per "+per+" (attempts of rerunnable tasks begun again)", "reruns per "+per, points, per)
	var top int64
	for _, p := range points {
		top = max(top, p.Reruns)
	}
	top = niceTop(top)
	countAxis(&b, top)
	n := len(points)
	w := colW(n)
	for i, p := range points {
		x := colX(i, n)
		b.f(`<g class="pt" data-start="%s" data-reruns="%d"><title>%s: %d reruns</title>`, p.Start.UTC().Format(time.RFC3339), p.Reruns, esc(timeLabel(p.Start, per)), p.Reruns)
		b.f(`<rect class="hit" x="%.1f" y="%d" width="%.1f" height="%d"/>`, x, plotT, w, plotHeight)
		if p.Reruns > 0 {
			y := yCount(p.Reruns, top)
			b.f(`<rect class="c-rerun" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x+w*0.15, y, w*0.7, float64(plotT+plotHeight)-y)
		}
		b.f(`</g>`)
	}
	closeChart(&b)
	return template.HTML(b.String())
}

// histogramChart: a histogram's buckets as bars, each with its count
// (data-count, <title>); small (the tools page) or large (trends).
func histogramChart(h taskstore.Histogram, w, ht int, class, title string) template.HTML {
	var b svgBuf
	total := h.Total()
	q50, q95 := h.Quantile(.5), h.Quantile(.95)
	summary := fmt.Sprintf("%s: %d tasks, p50 %s, p95 %s", title, total, quantileText(q50), quantileText(q95))
	b.f(`<svg class="hist %s" role="img" viewBox="0 0 %d %d" width="%d" height="%d" data-total="%d" data-p50-ms="%s" data-p95-ms="%s"><title>%s</title>`,
		esc(class), w, ht, w, ht, total, quantileAttr(q50), quantileAttr(q95), esc(summary))
	var top int64
	for _, c := range h {
		top = max(top, c)
	}
	labels := ht > 40 // the large one has bucket labels under its bars
	plot := float64(ht)
	if labels {
		plot -= 16
	}
	bw := float64(w) / float64(len(h))
	for i, c := range h {
		bound := "more than " + msText(taskstore.TrendBounds[len(taskstore.TrendBounds)-1])
		if i < len(taskstore.TrendBounds) {
			bound = "up to " + msText(taskstore.TrendBounds[i])
		}
		bh := 0.0
		if top > 0 {
			bh = float64(c) / float64(top) * (plot - 1)
		}
		b.f(`<g class="bkt" data-bucket="%d" data-count="%d"><title>%s: %d</title><rect class="hit" x="%.1f" y="0" width="%.1f" height="%.1f"/>`, i, c, esc(bound), c, float64(i)*bw, bw, plot)
		if c > 0 {
			b.f(`<rect class="c-hist" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, float64(i)*bw+sparkG, plot-max(bh, 1), max(bw-2*sparkG, 1), max(bh, 1))
		}
		b.f(`</g>`)
		if labels && i%3 == 0 && i < len(taskstore.TrendBounds) {
			b.f(`<text class="tick" x="%.1f" y="%d">%s</text>`, float64(i)*bw, ht-3, esc(msText(taskstore.TrendBounds[i])))
		}
	}
	b.f(`<line class="axis" x1="0" y1="%.1f" x2="%d" y2="%.1f"/></svg>`, plot, w, plot)
	return template.HTML(b.String())
}

// toolSparks are the tools page's duration histograms, by tool: the
// current and the previous hour (nil when the store cannot say: the page
// still shows the decisions).
func (c *Console) toolSparks(ctx context.Context, rows []ToolRow) map[string]template.HTML {
	tools := make([]string, len(rows))
	for i, r := range rows {
		tools[i] = r.Tool
	}
	hs, err := c.cfg.Store.TrendDurations(ctx, tools)
	if err != nil {
		c.cfg.Logger.Warn().Str("op", "console").Err(err).Msg("console cannot read the tools' trends")
		return nil
	}
	out := make(map[string]template.HTML, len(rows))
	for _, t := range tools {
		out[t] = histogramChart(hs[t], sparkW, sparkH, "spark", "Durations in the last one to two hours")
	}
	return out
}
