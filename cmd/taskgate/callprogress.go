package main

// taskgate call --task on a terminal: one live line on stderr, rewritten
// in place, with the elapsed time, the task's status and status message
// (MCP 2025-11-25, Tasks, "Task Status") and, once the server reports
// progress with a total (Basic/Utilities, "Progress": notifications/progress
// carry progress, total and message), a bar. On a pipe the plain status
// lines of follow are kept as they are, byte for byte.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-isatty"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// barWidth is the number of cells of the progress bar.
const barWidth = 20

// clearEOL is the ANSI/ECMA-48 "Erase in Line" (EL, CSI K) sequence,
// which clears from the cursor to the end of the line.
const clearEOL = "\x1b[K"

// terminal is w's file when w is a terminal, else nil.
func terminal(w io.Writer) *os.File {
	f, ok := w.(*os.File)
	if !ok || !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return nil
	}
	return f
}

// liveLine is the line being rewritten. Its methods are safe for
// concurrent use: progress arrives on the tasks/result stream while the
// status comes from tasks/get polls.
type liveLine struct {
	mu        sync.Mutex
	w         io.Writer
	width     int // columns; the line is clipped to fit, as a wrapped line cannot be rewritten with \r
	start     time.Time
	id        string
	status    string
	statusMsg string
	progress  float64
	total     float64 // 0: no total reported, no bar
	progMsg   string
	drawn     bool
}

func newLiveLine(f *os.File, id string, start time.Time) *liveLine {
	return &liveLine{w: f, width: termWidth(f), start: start, id: id}
}

// setTask records a status and its message.
func (l *liveLine) setTask(t taskView) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status, l.statusMsg = t.Status, t.StatusMessage
}

// progressParams are the fields of notifications/progress the line shows.
type progressParams struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total"`
	Message  string  `json:"message"`
}

// setProgress records a notifications/progress's params; bad params are
// ignored (progress is only shown, never acted on).
func (l *liveLine) setProgress(raw json.RawMessage) {
	var p progressParams
	if json.Unmarshal(raw, &p) != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.progress, l.total, l.progMsg = p.Progress, p.Total, p.Message
}

// draw rewrites the line as of now.
func (l *liveLine) draw(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprint(l.w, "\r"+clipCols(l.text(now), l.width)+clearEOL)
	l.drawn = true
}

// finish draws the line a last time and ends it with a newline.
func (l *liveLine) finish(now time.Time) {
	l.draw(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprint(l.w, "\n")
	l.drawn = false
}

// say prints a whole line above the live one, which is drawn again.
func (l *liveLine) say(line string) {
	l.mu.Lock()
	if l.drawn {
		fmt.Fprint(l.w, "\r"+clearEOL)
	}
	fmt.Fprintln(l.w, line)
	drawn := l.drawn
	l.mu.Unlock()
	if drawn {
		l.draw(time.Now())
	}
}

// text is the line: elapsed time, task, status (message), then the bar.
func (l *liveLine) text(now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s task %s: %s%s", elapsed(now.Sub(l.start)), l.id, l.status, statusNote(l.statusMsg))
	if l.total > 0 {
		fmt.Fprintf(&b, " %s %s/%s", bar(l.progress/l.total), num(l.progress), num(l.total))
	} else if l.progress > 0 {
		fmt.Fprintf(&b, " %s", num(l.progress))
	}
	if l.progMsg != "" && l.progMsg != l.statusMsg {
		b.WriteString(" " + l.progMsg)
	}
	return b.String()
}

// elapsed is d as 7s, 1m05s or 1h02m03s.
func elapsed(d time.Duration) string {
	s := int(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm%02ds", s/3600, s/60%60, s%60)
}

// bar is a fraction as [#####...............]; out-of-range values are
// clamped, since a server may overshoot its own total.
func bar(frac float64) string {
	n := int(min(max(frac, 0), 1) * barWidth)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", barWidth-n) + "]"
}

// num prints a progress value without a needless fraction.
func num(v float64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0")
}

// clipCols cuts s to width-1 runes (the last column left free so the
// cursor never wraps), ending in "…" when cut.
func clipCols(s string, width int) string {
	if width <= 1 || utf8.RuneCountInString(s) < width {
		return s
	}
	r := []rune(s)
	return string(r[:width-2]) + "…"
}

// followLive is follow on a terminal. tasks/result is asked at once, so
// that the progress the task reports comes on its stream (the gateway
// sends a task's notifications/progress to an open tasks/result stream,
// MCP 2025-11-25, Tasks, "Associating Task-Related Messages"); tasks/get
// is polled meanwhile, at the task's pollInterval, for the status and its
// message; a one-second tick keeps the elapsed time current.
func (cl *caller) followLive(ctx context.Context, t taskView) error {
	cl.live = newLiveLine(cl.tty, t.TaskID, time.Now())
	cl.live.setTask(t)
	cl.live.draw(time.Now())
	type answer struct {
		raw json.RawMessage
		err error
	}
	done := make(chan answer, 1)
	go func() {
		raw, err := cl.requestNoting(ctx, "tasks/result", map[string]any{"taskId": t.TaskID}, cl.note)
		done <- answer{raw, err}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	poll := time.NewTimer(pollWait(t))
	defer poll.Stop()
	for {
		select {
		case a := <-done:
			if a.err != nil && ctx.Err() != nil {
				cl.live.finish(time.Now())
				return cl.abandon(t.TaskID, ctx.Err())
			}
			if !t.terminal() { // the last poll may predate the end
				if raw, err := cl.request(ctx, "tasks/get", map[string]any{"taskId": t.TaskID}); err == nil && json.Unmarshal(raw, &t) == nil {
					cl.live.setTask(t)
				}
			}
			// The line ends before the result, which may go to the same terminal.
			cl.live.finish(time.Now())
			return cl.end(ctx, t, a.raw, a.err, func(taskView) {})
		case <-ctx.Done():
			cl.live.finish(time.Now())
			return cl.abandon(t.TaskID, ctx.Err())
		case now := <-tick.C:
			cl.live.draw(now)
		case <-poll.C:
			// A failed poll is not fatal here: tasks/result decides.
			if raw, err := cl.request(ctx, "tasks/get", map[string]any{"taskId": t.TaskID}); err == nil && json.Unmarshal(raw, &t) == nil {
				cl.live.setTask(t)
				cl.live.draw(time.Now())
			}
			if !t.terminal() {
				poll.Reset(pollWait(t))
			}
		}
	}
}

// note takes the notifications on the tasks/result stream: progress, and
// a status notification should a server send it there.
func (cl *caller) note(n *jsonrpc.Request) {
	switch n.Method {
	case "notifications/progress":
		cl.live.setProgress(n.Params)
	case "notifications/tasks/status":
		var t taskView
		if json.Unmarshal(n.Params, &t) != nil || t.Status == "" {
			return
		}
		cl.live.setTask(t)
	default:
		return
	}
	cl.live.draw(time.Now())
}

// pollWait is the wait before the next tasks/get: the task's
// pollInterval, at least 100 ms.
func pollWait(t taskView) time.Duration {
	return time.Duration(max(t.PollInterval, 100)) * time.Millisecond
}
