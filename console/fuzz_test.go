package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequest sends arbitrary paths, queries and forms to the console:
// every answer is a page, a redirect or a precise 4xx, never a panic or a
// 500, and never markup from the request.
const liveScript = `<script src="/static/live.js" defer></script>`

func FuzzRequest(f *testing.F) {
	for _, s := range []string{"/?status=failed&tool=x", "/?cursor=1.abc", "/?cursor=17%2E00000000-0000-4000-8000-000000000000%7C0123456789abcdef0123456789abcdef",
		"/tasks/%3Cscript%3E", "/?id=%2F%2Fevil", "/failures?x=1", "/login?next=//evil", "/static/console.css", "/tasks/x/cancel",
		"/trends?tool=%3Cb%3Etool%3C%2Fb%3E&span=day", "/trends?span=%00", "/tools"} {
		f.Add("GET", s, "")
		f.Add("POST", s, "csrf=x&token=y&next=/")
	}
	tf := newFixture(f, "", nil)
	tf.create(authOwner, "<b>tool</b>")
	f.Fuzz(func(t *testing.T, method, target, form string) {
		if method != "GET" && method != "POST" || !strings.HasPrefix(target, "/") {
			return
		}
		req, err := http.NewRequest(method, "http://127.0.0.1:9090"+target, strings.NewReader(form))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://127.0.0.1:9090")
		w := httptest.NewRecorder()
		tf.con.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s (%q) = %d %s", method, target, form, w.Code, w.Body)
		}
		// The console's own script (live updates) is the one allowed.
		body := strings.ReplaceAll(w.Body.String(), liveScript, "")
		if strings.Contains(body, "<script") || strings.Contains(body, "<b>") {
			t.Fatalf("%s %s rendered markup from data:\n%s", method, target, w.Body)
		}
	})
}
