package console

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

func parseTemplates() (map[string]*template.Template, error) {
	funcs := template.FuncMap{"owner": OwnerLabel, "trendsLink": func(tool string, span taskstore.TrendSpan) string { return trendsLink(tool, span) }}
	pages, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, p := range pages {
		name := strings.TrimSuffix(path.Base(p), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", p)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// render writes page with data (a map, to which it adds what the layout
// needs), buffered so that a template error is a 500, not half a page.
func (c *Console) render(w http.ResponseWriter, status int, page string, data map[string]any) {
	data["Page"] = page
	data["LoggedIn"] = c.cfg.Token != ""
	if _, ok := data["LiveURL"]; !ok {
		data["LiveURL"] = ""
	}
	var b bytes.Buffer
	if err := c.tmpl[page].Execute(&b, data); err != nil {
		c.cfg.Logger.Error().Str("op", "console_render").Err(err).Msg("console page failed")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// storeError answers a store failure: 503 when Redis is away, 404 for a
// task that is not (or no longer) there.
func (c *Console) storeError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, taskstore.ErrNotFound), errors.Is(err, taskstore.ErrExpired):
		http.Error(w, "no such task", http.StatusNotFound)
	case errors.Is(err, taskstore.ErrBadCursor), errors.Is(err, taskstore.ErrBadFilter):
		http.Error(w, strings.TrimPrefix(err.Error(), "taskstore: "), http.StatusBadRequest)
	case errors.Is(err, taskstore.ErrOpsDisabled):
		http.Error(w, "the console has no task index on Redis Cluster", http.StatusNotImplemented)
	default:
		c.cfg.Logger.Warn().Str("op", "console").Err(err).Msg("console cannot read the store")
		http.Error(w, "the task store is unavailable", http.StatusServiceUnavailable)
	}
}

// row is a task line of the lists.
type row struct {
	T        *taskstore.Task
	Age      string
	Attempts int
}

// rows makes the lines of ts; attempts holds the attempts of the tasks
// whose record has the field (a task without it ran once).
func (c *Console) rows(ts []*taskstore.Task, attempts map[string]int) []row {
	now := c.cfg.Clock()
	out := make([]row, len(ts))
	for i, t := range ts {
		out[i] = row{T: t, Age: age(now.Sub(t.CreatedAt)), Attempts: max(attempts[t.ID], 1)}
	}
	return out
}

func age(d time.Duration) string {
	switch {
	case d < time.Second:
		return "<1s"
	case d < time.Hour:
		return d.Truncate(time.Second).String()
	}
	return d.Truncate(time.Minute).String()
}

func (c *Console) tasks(w http.ResponseWriter, r *http.Request, _ string) {
	q := r.URL.Query()
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		http.Redirect(w, r, "/tasks/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	query := taskstore.OpsQuery{Status: taskstore.Status(q.Get("status")), Tool: q.Get("tool"), Cursor: q.Get("cursor")}
	if !c.cfg.Store.OpsEnabled() {
		c.render(w, http.StatusOK, "tasks", map[string]any{"Disabled": true, "Q": query, "Statuses": taskstore.Statuses})
		return
	}
	page, err := c.cfg.Store.OpsList(r.Context(), query)
	if err != nil {
		c.storeError(w, err)
		return
	}
	live := url.Values{}
	if query.Status != "" {
		live.Set("status", string(query.Status))
	}
	if query.Tool != "" {
		live.Set("tool", query.Tool)
	}
	if query.Cursor != "" {
		live.Set("cursor", query.Cursor)
	}
	next := ""
	if page.Next != "" {
		v := url.Values{"cursor": {page.Next}}
		if query.Status != "" {
			v.Set("status", string(query.Status))
		}
		if query.Tool != "" {
			v.Set("tool", query.Tool)
		}
		next = "/?" + v.Encode()
	}
	c.render(w, http.StatusOK, "tasks", map[string]any{"Rows": c.rows(page.Tasks, page.Attempts), "Q": query, "Next": next,
		"Statuses": taskstore.Statuses, "LiveURL": "/live/tasks?" + live.Encode()})
}

func (c *Console) task(w http.ResponseWriter, r *http.Request, how string) {
	t, err := c.cfg.Store.OpsFind(r.Context(), r.PathValue("id"))
	if err != nil {
		c.storeError(w, err)
		return
	}
	inputs, err := c.cfg.Store.OpsInputs(r.Context(), t)
	if err != nil {
		c.storeError(w, err)
		return
	}
	timeline, attempts, err := c.cfg.Store.OpsTimeline(r.Context(), t)
	if err != nil {
		c.storeError(w, err)
		return
	}
	traceID, traceURL := "", ""
	if id, _, _ := strings.Cut(t.Trace, "-"); len(id) == 32 {
		traceID = id
		if c.cfg.TraceURL != "" {
			traceURL = strings.ReplaceAll(c.cfg.TraceURL, "{trace_id}", url.PathEscape(id))
		}
	}
	show := r.URL.Query().Get("show") == "result"
	c.render(w, http.StatusOK, "task", map[string]any{"T": t, "Age": age(c.cfg.Clock().Sub(t.CreatedAt)),
		"Inputs": inputs, "TraceID": traceID, "TraceURL": template.URL(traceURL),
		"ResultSize": len(t.Result), "ErrorSize": len(t.Error), "Show": show,
		"Result": string(t.Result), "Error": string(t.Error), "Progress": string(t.Progress),
		"CSRF": c.csrf, "CanCancel": !t.Status.Terminal(), "Timeline": timeline, "Attempts": attempts,
		"LiveURL": "/live/tasks/" + url.PathEscape(t.ID)})
}

func (c *Console) cancel(w http.ResponseWriter, r *http.Request, how string) {
	if !c.actionForm(w, r, how) {
		return
	}
	id := r.PathValue("id")
	t, err := c.cfg.Store.OpsFind(r.Context(), id)
	if err != nil {
		c.storeError(w, err)
		return
	}
	if _, err := c.cfg.Store.OpsCancel(r.Context(), t.Owner, t.ID, CancelMessage); err != nil {
		if errors.Is(err, taskstore.ErrTerminal) {
			http.Error(w, "the task is already terminal", http.StatusConflict)
			return
		}
		c.storeError(w, err)
		return
	}
	c.cfg.Logger.Info().Str("op", "console_cancel").Str("task_id", t.ID).Str("tool", t.Tool).
		Str("owner", OwnerLabel(t.Owner)).Msg("task cancelled by the operator")
	http.Redirect(w, r, "/tasks/"+url.PathEscape(t.ID), http.StatusSeeOther)
}

// actionForm reads the form of an operator's action (cancel, retry) and
// checks its CSRF token, answering 400 or 403 when it fails. A cookie or
// no token: the form's CSRF token too (besides SameSite=Strict). Bearer:
// no browser sends that header by itself.
func (c *Console) actionForm(w http.ResponseWriter, r *http.Request, how string) bool {
	if !readForm(w, r) {
		return false
	}
	if how != "bearer" && subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(c.csrf)) != 1 {
		http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
		return false
	}
	return true
}

func (c *Console) tools(w http.ResponseWriter, r *http.Request, _ string) {
	data := map[string]any{}
	if c.cfg.Tools == nil {
		data["Off"] = true
	} else if rows, err := c.cfg.Tools(r.Context()); err != nil {
		data["Err"] = err.Error()
	} else {
		data["Rows"] = rows
		data["Sparks"] = c.toolSparks(r.Context(), rows) // trends.go
	}
	c.render(w, http.StatusOK, "tools", data)
}

// replicaRow is a line of the replicas page: a heartbeat, or only the
// replica's latency publishes (a replica that publishes no heartbeat).
type replicaRow struct {
	taskstore.ReplicaStatus
	Heartbeat bool
	LastSweep string
	LastSeen  string
}

func (c *Console) replicas(w http.ResponseWriter, r *http.Request, _ string) {
	beats, err := c.cfg.Store.Replicas(r.Context(), replicasWindow)
	if err != nil {
		c.storeError(w, err)
		return
	}
	seen, err := c.cfg.Store.ReplicasSeen(r.Context(), replicasWindow)
	if err != nil {
		c.storeError(w, err)
		return
	}
	now := c.cfg.Clock()
	rows := make([]replicaRow, 0, len(beats)+len(seen))
	have := map[string]bool{}
	for _, b := range beats {
		have[b.ID] = true
		sweep := "not yet"
		if !b.LastSweep.IsZero() {
			sweep = age(now.Sub(b.LastSweep)) + " ago"
		}
		rows = append(rows, replicaRow{ReplicaStatus: b, Heartbeat: true, LastSweep: sweep, LastSeen: age(now.Sub(b.At)) + " ago"})
	}
	for id, at := range seen {
		if !have[id] {
			rows = append(rows, replicaRow{ReplicaStatus: taskstore.ReplicaStatus{ID: id}, LastSeen: age(now.Sub(at)) + " ago"})
		}
	}
	slices.SortFunc(rows, func(a, b replicaRow) int { return strings.Compare(a.ID, b.ID) })
	c.render(w, http.StatusOK, "replicas", map[string]any{"Rows": rows, "Window": replicasWindow})
}

// failureRow is a line of the failures page: a failed live task, or an
// expired one that is gone.
type failureRow struct {
	ID, Tool, Owner, Age string
	Gone                 bool
}

type failureGroup struct {
	Message string
	Rows    []failureRow
}

// expiredMessage groups the tasks whose ttl elapsed before they ended.
const expiredMessage = "Expired before it ended: its ttl elapsed while it was working or waiting for input (the task is gone)."

func (c *Console) failures(w http.ResponseWriter, r *http.Request, _ string) {
	if !c.cfg.Store.OpsEnabled() {
		c.storeError(w, taskstore.ErrOpsDisabled)
		return
	}
	page, err := c.cfg.Store.OpsList(r.Context(), taskstore.OpsQuery{Status: taskstore.StatusFailed, Limit: failuresShown})
	if err != nil {
		c.storeError(w, err)
		return
	}
	expired, err := c.cfg.Store.OpsExpired(r.Context(), failuresShown)
	if err != nil {
		c.storeError(w, err)
		return
	}
	var groups []*failureGroup
	at := map[string]*failureGroup{}
	add := func(msg string, fr failureRow) {
		g := at[msg]
		if g == nil {
			g = &failureGroup{Message: msg}
			at[msg] = g
			groups = append(groups, g)
		}
		g.Rows = append(g.Rows, fr)
	}
	now := c.cfg.Clock()
	for _, t := range page.Tasks {
		add(t.StatusMessage, failureRow{ID: t.ID, Tool: t.Tool, Owner: t.Owner, Age: age(now.Sub(t.CreatedAt))})
	}
	for _, e := range expired {
		add(expiredMessage, failureRow{ID: e.ID, Tool: e.Tool, Age: age(now.Sub(e.ExpiredAt)), Gone: true})
	}
	slices.SortStableFunc(groups, func(a, b *failureGroup) int { return len(b.Rows) - len(a.Rows) })
	c.render(w, http.StatusOK, "failures", map[string]any{"Groups": groups, "N": len(page.Tasks), "NExpired": len(expired), "Max": failuresShown})
}
