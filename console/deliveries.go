package console

// The deliveries page: per webhook endpoint, its queue's figures and its
// dead letters (deliveries whose retry window was spent), each with a
// Retry button. The page shows what the store keeps of a delivery: the
// event's id, type and task, attempts, times, the last error and an
// excerpt of the payload's data. A payload carries no arguments, answers
// or results by design (the gateway renders it without them), and the
// store keeps no endpoint URL or secret, so none can show here.
//
// Cost: the endpoints come from Config.Webhooks and from a SCAN of the
// store (at most once per endpointsEvery per console); each endpoint
// shown is two more reads (its figures, its newest dead letters, bounded).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/taskgate/taskgate/taskstore"
)

const (
	// endpointsShown bounds the endpoints the page reads.
	endpointsShown = 50
	// lettersShown is how many dead letters per endpoint the page shows
	// for every endpoint, lettersShownOne for one (?endpoint=NAME).
	lettersShown, lettersShownOne = 20, 200
	// excerptBytes bounds a payload excerpt, errorBytes a last error.
	excerptBytes, errorBytes = 300, 500
	// endpointsEvery is how long the store's endpoint list is reused: it
	// is a SCAN of every key.
	endpointsEvery = time.Minute
)

// endpointCache holds the store's endpoint names for endpointsEvery.
type endpointCache struct {
	mu    sync.Mutex
	at    time.Time
	names []string
}

// storeEndpoints returns the store's endpoints, read again when the cache
// is older than endpointsEvery.
func (c *Console) storeEndpoints(ctx context.Context) ([]string, error) {
	ec := &c.endpoints
	ec.mu.Lock()
	defer ec.mu.Unlock()
	now := c.cfg.Clock()
	if !ec.at.IsZero() && now.Sub(ec.at) < endpointsEvery {
		return ec.names, nil
	}
	names, err := c.cfg.Store.WebhookEndpoints(ctx, endpointsShown)
	if err != nil {
		return nil, err
	}
	ec.names, ec.at = names, now
	return names, nil
}

// configured says whether name is an endpoint in force; with no
// Config.Webhooks, every name is (the console cannot tell).
func (c *Console) configured(name string) bool {
	return c.cfg.Webhooks == nil || slices.Contains(c.cfg.Webhooks(), name)
}

// endpointView is an endpoint's section of the page.
type endpointView struct {
	Name       string
	Configured bool
	Due, Dead  int64
	Letters    []letterView
	More       int64 // dead letters not shown
}

// letterView is one dead letter's row.
type letterView struct {
	EventID, Type, TaskID string
	Attempts              int
	First, Last           time.Time
	FirstAge, LastAge     string
	Error, Excerpt        string
}

func (c *Console) deliveries(w http.ResponseWriter, r *http.Request, _ string) {
	only := r.URL.Query().Get("endpoint")
	names, err := c.endpointNames(r.Context(), only)
	if err != nil {
		c.deliveriesError(w, err)
		return
	}
	limit := lettersShown
	if only != "" {
		limit = lettersShownOne
	}
	views := make([]endpointView, 0, len(names))
	for _, n := range names {
		v, err := c.endpointView(r.Context(), n, limit)
		if err != nil {
			c.deliveriesError(w, err)
			return
		}
		views = append(views, v)
	}
	data := map[string]any{"Endpoints": views, "Only": only, "Limit": limit, "CSRF": c.csrf,
		"Max": endpointsShown, "Cut": len(names) == endpointsShown, "Known": c.cfg.Webhooks != nil}
	if ev := r.URL.Query().Get("retried"); ev != "" {
		data["Retried"], data["RetriedEndpoint"] = ev, r.URL.Query().Get("from")
	}
	c.render(w, http.StatusOK, "deliveries", data)
}

// endpointNames are the endpoints to show: only, or the configured ones
// and the store's, sorted, at most endpointsShown.
func (c *Console) endpointNames(ctx context.Context, only string) ([]string, error) {
	if only != "" {
		return []string{only}, nil
	}
	names, err := c.storeEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	if c.cfg.Webhooks != nil {
		names = append(slices.Clone(names), c.cfg.Webhooks()...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	return names[:min(len(names), endpointsShown)], nil
}

func (c *Console) endpointView(ctx context.Context, name string, limit int) (endpointView, error) {
	due, dead, err := c.cfg.Store.WebhookQueueStats(ctx, name)
	if err != nil {
		return endpointView{}, err
	}
	v := endpointView{Name: name, Configured: c.configured(name), Due: due, Dead: dead}
	if dead == 0 {
		return v, nil
	}
	ds, err := c.cfg.Store.DeadDeliveries(ctx, name, limit)
	if err != nil {
		return endpointView{}, err
	}
	now := c.cfg.Clock()
	for _, d := range ds {
		v.Letters = append(v.Letters, letterView{EventID: d.EventID, Type: d.Type, TaskID: d.TaskID, Attempts: d.Attempts,
			First: d.EnqueuedAt, Last: d.DeadAt, FirstAge: age(now.Sub(d.EnqueuedAt)), LastAge: age(now.Sub(d.DeadAt)),
			Error: cutText(d.LastError, errorBytes), Excerpt: excerpt(d.Payload)})
	}
	v.More = max(dead-int64(len(ds)), 0)
	return v, nil
}

// excerpt is the start of a payload's data (Standard Webhooks' envelope,
// {"type", "timestamp", "data"}), compact and in its order, without the
// fields the row shows in columns of their own (the event and task ids,
// the console link); the payload itself when it is not such an envelope.
func excerpt(payload []byte) string {
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(payload, &env) != nil || len(env.Data) == 0 {
		return cutText(string(payload), excerptBytes)
	}
	if s, ok := dataFields(env.Data); ok {
		return cutText(s, excerptBytes)
	}
	var b bytes.Buffer
	if json.Compact(&b, env.Data) != nil {
		return cutText(string(payload), excerptBytes)
	}
	return cutText(b.String(), excerptBytes)
}

// shownApart are data fields with a column of their own.
var shownApart = map[string]bool{"eventId": true, "taskId": true, "consoleUrl": true}

// dataFields is the object data, compact, in order, without shownApart;
// ok is false when data is not an object.
func dataFields(data json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for dec.More() {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		var val json.RawMessage
		if err != nil || !isKey || dec.Decode(&val) != nil {
			return "", false
		}
		if shownApart[key] {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		if json.Compact(&b, val) != nil {
			return "", false
		}
		if b.Len() > excerptBytes { // enough for the excerpt
			break
		}
	}
	b.WriteByte('}')
	return b.String(), true
}

// cutText shortens s to at most n bytes on a rune boundary, marking the cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// deliveriesError answers a store failure of the deliveries page.
func (c *Console) deliveriesError(w http.ResponseWriter, err error) {
	if errors.Is(err, taskstore.ErrBadEndpoint) {
		http.Error(w, "no such webhook endpoint name", http.StatusBadRequest)
		return
	}
	c.storeError(w, err)
}

// retryDelivery puts a dead letter back in its endpoint's queue, due now
// (taskstore RetryDead), and sends the operator back to the page, which
// says so.
func (c *Console) retryDelivery(w http.ResponseWriter, r *http.Request, how string) {
	if !c.actionForm(w, r, how) {
		return
	}
	ep, ev := r.PostForm.Get("endpoint"), r.PostForm.Get("event")
	if !c.configured(ep) {
		// Its queue has no dispatcher: the retry would wait forever.
		http.Error(w, "the webhook endpoint "+ep+" is not configured (any more): its dead letters are kept, not sent", http.StatusConflict)
		return
	}
	if err := c.cfg.Store.RetryDead(r.Context(), ep, ev); err != nil {
		if errors.Is(err, taskstore.ErrNotFound) {
			http.Error(w, "no such dead letter of this endpoint (retried already, or expired)", http.StatusNotFound)
			return
		}
		c.deliveriesError(w, err)
		return
	}
	c.cfg.Logger.Info().Str("op", "console_webhook_retry").Str("endpoint", ep).Str("event_id", ev).
		Msg("webhook dead letter queued again by the operator")
	back := url.Values{"retried": {ev}, "from": {ep}}
	if r.PostForm.Get("only") != "" {
		back.Set("endpoint", ep)
	}
	http.Redirect(w, r, "/deliveries?"+back.Encode(), http.StatusSeeOther)
}
