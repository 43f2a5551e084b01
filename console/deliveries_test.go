package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/taskgate/taskgate/taskstore"
)

// deadLetter makes a dead letter of endpoint ep for a new task id, as the
// dispatcher would: enqueue, claim, dead. It returns the event id.
func (f *fixture) deadLetter(ep, payload, lastErr string) (eventID, taskID string) {
	f.t.Helper()
	ctx := context.Background()
	taskID = uuid.NewString()
	eventID = "evt_" + taskID + "_1"
	if ok, err := f.store.EnqueueDelivery(ctx, taskstore.Delivery{EventID: eventID, Endpoint: ep, TaskID: taskID,
		Type: "task.input_required", Payload: []byte(payload)}, 48*time.Hour); err != nil || !ok {
		f.t.Fatalf("EnqueueDelivery: %t %v", ok, err)
	}
	if ds, err := f.store.ClaimDeliveries(ctx, ep, 10, time.Minute); err != nil || len(ds) != 1 {
		f.t.Fatalf("ClaimDeliveries: %v %v", ds, err)
	}
	if err := f.store.DeliveryDead(ctx, ep, eventID, lastErr); err != nil {
		f.t.Fatal(err)
	}
	return eventID, taskID
}

func (f *fixture) queue(ep string) (due, dead int64) {
	f.t.Helper()
	due, dead, err := f.store.WebhookQueueStats(context.Background(), ep)
	if err != nil {
		f.t.Fatal(err)
	}
	return due, dead
}

const hostilePayload = `{"type":"task.input_required","timestamp":"2026-11-28T18:00:00Z","data":{"task_id":"x","tool":"<script>alert(1)</script>","status":"input_required"}}`

// TestDeliveriesPage: the page lists the configured endpoints and those
// with queues, their figures, and each dead letter with its event, task
// link, attempts, last error and data excerpt, escaped, and a Retry form
// with the CSRF token; an endpoint no longer configured shows its dead
// letters without a Retry.
func TestDeliveriesPage(t *testing.T) {
	f := newFixture(t, token, func(c *Config) { c.Webhooks = func() []string { return []string{"chat", "idle"} } })
	ev, task := f.deadLetter("chat", hostilePayload, "HTTP 500 <b>boom</b>")
	old, _ := f.deadLetter("removed", `{"data":{"n":1}}`, "not sent: connection refused")
	resp, page := f.do("GET", "/deliveries", "Bearer "+token, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /deliveries = %d %s", resp.StatusCode, page)
	}
	for _, want := range []string{
		`<a href="/deliveries"`, // the nav link
		`id="ep-chat"`, `id="ep-idle"`, `id="ep-removed"`,
		`<code>` + ev + `</code>`, `<a href="/tasks/` + task + `">`, "task.input_required",
		"HTTP 500 &lt;b&gt;boom&lt;/b&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;",
		`name="csrf" value="` + f.con.csrf + `"`, `name="event" value="` + ev + `"`,
		"<td>1</td>", // attempts
		"not configured on this replica",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the deliveries page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<b>boom") {
		t.Error("the deliveries page renders a payload or error unescaped")
	}
	if strings.Contains(page, `"timestamp"`) {
		t.Error("the excerpt shows the envelope, want its data only")
	}
	if strings.Contains(page, `name="event" value="`+old+`"`) {
		t.Error("a dead letter of an endpoint not configured has a Retry form")
	}
	if resp, _ := f.do("GET", "/deliveries", "", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /deliveries without credentials = %d, want a redirect to /login", resp.StatusCode)
	}
	if resp, _ := f.do("GET", "/deliveries?endpoint=%7Bbad%7D", "Bearer "+token, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /deliveries?endpoint={bad} = %d, want 400", resp.StatusCode)
	}
}

// TestDeliveryRetry: Retry makes the dead letter due again (gone from
// the dead letters, in the queue, claimable) and the page says so; a
// second retry of it is 404.
func TestDeliveryRetry(t *testing.T) {
	f := newFixture(t, "", func(c *Config) { c.Webhooks = func() []string { return []string{"chat"} } })
	ev, _ := f.deadLetter("chat", hostilePayload, "HTTP 500")
	if due, dead := f.queue("chat"); due != 0 || dead != 1 {
		t.Fatalf("before the retry: due %d dead %d", due, dead)
	}
	_, page := f.do("GET", "/deliveries", "", nil)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the deliveries page")
	}
	form := url.Values{"csrf": {m[1]}, "endpoint": {"chat"}, "event": {ev}}
	resp, body := f.do("POST", "/deliveries/retry", "", form)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("retry = %d %s", resp.StatusCode, body)
	}
	if due, dead := f.queue("chat"); due != 1 || dead != 0 {
		t.Errorf("after the retry: due %d dead %d, want 1 and 0", due, dead)
	}
	ds, err := f.store.ClaimDeliveries(context.Background(), "chat", 10, time.Minute)
	if err != nil || len(ds) != 1 || ds[0].EventID != ev {
		t.Errorf("the retried delivery is not due now: %+v %v", ds, err)
	}
	_, page = f.do("GET", resp.Header.Get("Location"), "", nil)
	if !strings.Contains(page, `id="flash"`) || !strings.Contains(page, "<code>"+ev+"</code> to <strong>chat</strong> is queued again") {
		t.Error("the page after a retry does not say the delivery is queued again")
	}
	if !strings.Contains(page, "1 waiting") || !strings.Contains(page, "0 dead letters") {
		t.Error("the page after a retry does not show it waiting")
	}
	if resp, _ := f.do("POST", "/deliveries/retry", "", form); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a second retry = %d, want 404", resp.StatusCode)
	}
}

// TestDeliveryRetryRefused: a retry without or with a wrong CSRF token,
// from another Origin, to another Host, without credentials, or of an
// endpoint not configured changes nothing.
func TestDeliveryRetryRefused(t *testing.T) {
	f := newFixture(t, token, func(c *Config) { c.Webhooks = func() []string { return []string{"chat"} } })
	ev, _ := f.deadLetter("chat", hostilePayload, "HTTP 500")
	gone, _ := f.deadLetter("removed", hostilePayload, "HTTP 500")
	resp, _ := f.do("POST", "/login", "", url.Values{"token": {token}})
	session := resp.Cookies()[0]
	form := func(csrf, ep, event string) url.Values {
		return url.Values{"csrf": {csrf}, "endpoint": {ep}, "event": {event}}
	}
	cookie := "taskgate_console=" + session.Value
	origin := f.srv.URL
	cases := []struct {
		name string
		hdr  map[string]string
		form url.Values
		want int
	}{
		{"no CSRF token", map[string]string{"Cookie": cookie, "Origin": origin}, form("", "chat", ev), http.StatusForbidden},
		{"wrong CSRF token", map[string]string{"Cookie": cookie, "Origin": origin}, form("00", "chat", ev), http.StatusForbidden},
		{"another Origin", map[string]string{"Cookie": cookie, "Origin": "http://evil.example"}, form(f.con.csrf, "chat", ev), http.StatusForbidden},
		{"Origin null", map[string]string{"Cookie": cookie, "Origin": "null"}, form(f.con.csrf, "chat", ev), http.StatusForbidden},
		{"another Host", map[string]string{"Cookie": cookie, "Origin": "http://rebind.attacker.example:" + f.port(), "Host": "rebind.attacker.example:" + f.port()},
			form(f.con.csrf, "chat", ev), http.StatusMisdirectedRequest},
		{"no credentials", map[string]string{"Origin": origin}, form(f.con.csrf, "chat", ev), http.StatusUnauthorized},
		{"endpoint not configured", map[string]string{"Cookie": cookie, "Origin": origin}, form(f.con.csrf, "removed", gone), http.StatusConflict},
		{"bad event id", map[string]string{"Cookie": cookie, "Origin": origin}, form(f.con.csrf, "chat", "evt_nope"), http.StatusNotFound},
	}
	for _, tc := range cases {
		if resp, body := f.send("POST", "/deliveries/retry", tc.hdr, tc.form); resp.StatusCode != tc.want {
			t.Errorf("%s: retry = %d %s, want %d", tc.name, resp.StatusCode, body, tc.want)
		}
	}
	for _, ep := range []string{"chat", "removed"} {
		if due, dead := f.queue(ep); due != 0 || dead != 1 {
			t.Errorf("refused retries changed %s's queue: due %d dead %d", ep, due, dead)
		}
	}
	if resp, _ := f.send("GET", "/deliveries", map[string]string{"Cookie": cookie, "Host": "rebind.attacker.example"}, nil); resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("GET /deliveries with another Host = %d, want 421", resp.StatusCode)
	}
	// Bearer needs no CSRF token, as for cancel.
	if resp, body := f.do("POST", "/deliveries/retry", "Bearer "+token, form("", "chat", ev)); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("retry with Bearer = %d %s", resp.StatusCode, body)
	}
}

// TestDeliveriesEndpointsFromStore: without Config.Webhooks the page
// finds the endpoints in the store, read again once a minute has passed,
// and every dead letter has a Retry; with none it says so.
func TestDeliveriesEndpointsFromStore(t *testing.T) {
	now := time.Now()
	f := newFixture(t, "", func(c *Config) { c.Clock = func() time.Time { return now } })
	if _, page := f.do("GET", "/deliveries", "", nil); !strings.Contains(page, "No webhook endpoint") {
		t.Error("with no endpoint the page does not say so")
	}
	ev, _ := f.deadLetter("ci", `{"data":{}}`, "HTTP 502")
	if _, page := f.do("GET", "/deliveries", "", nil); strings.Contains(page, ev) {
		t.Error("the store's endpoints were read again within the minute")
	}
	now = now.Add(endpointsEvery)
	_, page := f.do("GET", "/deliveries", "", nil)
	if !strings.Contains(page, `id="ep-ci"`) || !strings.Contains(page, `name="event" value="`+ev+`"`) {
		t.Error("an endpoint found in the store is not shown with its Retry")
	}
}

func TestExcerpt(t *testing.T) {
	long := `{"data":{"m":"` + strings.Repeat("é", 400) + `"}}`
	for _, tc := range []struct{ in, want string }{
		{`{"type":"t","data":{ "eventId":"evt_1", "taskId":"x", "tool" : "a<b", "input": {"method": "m"}, "consoleUrl":"http://c/"}}`, `{"tool":"a<b","input":{"method":"m"}}`},
		{`{"type":"t","data":[1, 2]}`, `[1,2]`},
		{`not json`, `not json`},
		{`{"data":{"a":1,}}`, `{"data":{"a":1,}}`},
		{long, `{"m":"` + strings.Repeat("é", (excerptBytes-6)/2) + "…"},
	} {
		if got := excerpt([]byte(tc.in)); got != tc.want {
			t.Errorf("excerpt(%.40q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzExcerpt: any payload's excerpt is bounded, and valid UTF-8 when
// the payload is.
func FuzzExcerpt(f *testing.F) {
	for _, s := range []string{hostilePayload, `{"data":{"eventId":"e","a":[1,{"b":null}]}}`, `{"data":"é"}`, `{"data":{`, `[]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		got := excerpt(payload)
		if len(got) > excerptBytes+len("…") {
			t.Fatalf("excerpt of %d bytes", len(got))
		}
		if utf8.Valid(payload) && !utf8.ValidString(got) {
			t.Fatalf("excerpt(%q) = %q: not UTF-8", payload, got)
		}
	})
}
