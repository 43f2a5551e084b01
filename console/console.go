// Package console is taskgate's operator's console: server-rendered HTML
// pages of every live task across owners, the tools' decisions, the
// replicas, the recent failures and the webhook deliveries, served on a
// listener of its own (--console-listen) and never on the MCP one. All
// its state comes from the task store (Redis), so any replica shows the
// whole fleet. Its writes: cancelling a task, through the store's cancel
// (the task's worker, on whichever replica, hears it and cancels the
// upstream call as for any client's tasks/cancel; the task's timeline
// records it as the operator's), and retrying a webhook endpoint's dead
// letter (deliveries.go, which also shows each endpoint's queue). The
// trends page draws the store's per-minute figures of tasks as inline SVG,
// and the tools page each tool's recent durations (trends.go). The
// tasks list and a task's page update themselves over server-sent events
// (live.go, static/live.js).
//
// Access: with a token, a request needs "Authorization: Bearer <token>"
// or the session cookie the login form sets (HttpOnly, SameSite=Strict;
// its value is derived from the token, never the token). Without one,
// CheckListen keeps the console on loopback. The cancel and retry forms
// carry a CSRF token besides the SameSite cookie; a Bearer request needs
// none (a browser never adds that header by itself).
//
// Before any of that (host.go): only a Host the console serves (localhost,
// IP literals, Config.Listen's name, Config.Hosts) gets an answer, others
// 421, against DNS rebinding; a request that changes something must come
// from the console's own Origin, whatever its credential. The login
// form's next is kept to a local path (next.go).
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/taskstore"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Store is what the console reads and its one write (taskstore.Store).
type Store interface {
	OpsEnabled() bool
	OpsList(ctx context.Context, q taskstore.OpsQuery) (taskstore.OpsPage, error)
	OpsFind(ctx context.Context, id string) (*taskstore.Task, error)
	OpsInputs(ctx context.Context, t *taskstore.Task) ([]taskstore.OpsInput, error)
	OpsTimeline(ctx context.Context, t *taskstore.Task) ([]taskstore.TimelineEntry, int, error)
	OpsExpired(ctx context.Context, n int) ([]taskstore.ExpiredTask, error)
	ReplicasSeen(ctx context.Context, d time.Duration) (map[string]time.Time, error)
	Replicas(ctx context.Context, d time.Duration) ([]taskstore.ReplicaStatus, error)
	OpsCancel(ctx context.Context, owner, id, message string) (*taskstore.Task, error)
	// Watch subscribes to a task's events (its page's live updates).
	Watch(ctx context.Context, owner, id string) (*taskstore.Watch, error)
	// The deliveries page (deliveries.go): the webhook endpoints with
	// queues, their figures and dead letters, and its one write, a retry.
	WebhookEndpoints(ctx context.Context, limit int) ([]string, error)
	WebhookQueueStats(ctx context.Context, endpoint string) (due, dead int64, err error)
	DeadDeliveries(ctx context.Context, endpoint string, limit int) ([]taskstore.Delivery, error)
	RetryDead(ctx context.Context, endpoint, eventID string) error
	// The trends page and the tools page's histograms (trends.go).
	TrendStore
}

// ToolRow is one line of the tools page: what `taskgate tools` prints.
type ToolRow struct {
	Tool, Legacy, Modern, Tasks, Reason string
	Samples                             int
	P50Ms, P95Ms                        int64
}

// Config configures a Console.
type Config struct {
	Store Store
	// Token, when set, is required of every request (Bearer or the login
	// form's cookie).
	Token string
	// Listen is the console's listen address (--console-listen): its
	// host, when a name, is one the console answers to (host.go).
	Listen string
	// Hosts are the other names the console answers to, NAME or
	// NAME:PORT (--console-host: a proxy's public name); localhost and IP
	// literals it always answers. Any other Host gets 421.
	Hosts []string
	// TraceURL links a task's trace id: "{trace_id}" in it is replaced,
	// e.g. http://jaeger:16686/trace/{trace_id}. Empty: no link.
	TraceURL string
	// Tools lists the tools' decisions; nil: the page says it is off.
	Tools func(ctx context.Context) ([]ToolRow, error)
	// Webhooks names the webhook endpoints configured now (the
	// dispatcher's, which reload). The deliveries page lists them and
	// the endpoints the store has queues for, and retries a dead letter
	// of a configured endpoint only. Nil: the store's endpoints, each
	// retryable (the console cannot tell what is configured).
	Webhooks func() []string
	// Logger receives the operator's cancels (op "console_cancel").
	Logger zerolog.Logger
	// Clock is "now" for ages. Default time.Now.
	Clock func() time.Time
	// MaxLive caps the live-update streams (server-sent events) open at
	// once; one more is refused with 503. Default 16.
	MaxLive int
	// LivePoll is how often a tasks list's stream re-reads its page to
	// see whether it changed; Heartbeat how often a quiet stream sends a
	// comment so proxies keep it open. Defaults 2 s and 15 s.
	LivePoll, Heartbeat time.Duration
}

// CancelMessage is the statusMessage of a task the operator cancelled.
const CancelMessage = "Cancelled by the operator (taskgate console)."

// failuresShown is how many recent failed tasks the failures page reads.
const failuresShown = 200

// replicasWindow is how recently a replica must have published to show.
const replicasWindow = time.Minute

// Console is the console's http.Handler.
type Console struct {
	cfg     Config
	live    chan struct{} // a slot per open live stream (live.go)
	tmpl    map[string]*template.Template
	mux     *http.ServeMux
	session string // the cookie's value when a token is set
	hosts   *hostPolicy
	csrf    string // the cancel form's token
	// refusals logs refused requests (host.go), sampled: a hostile page
	// retrying in a loop is not a flood of lines.
	refusals zerolog.Logger
	// endpoints caches the store's webhook endpoints (deliveries.go).
	endpoints endpointCache
}

const cookieName = "taskgate_console"

// New checks cfg and returns the console.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil {
		return nil, errors.New("console: no store")
	}
	if cfg.TraceURL != "" {
		u, err := url.Parse(strings.ReplaceAll(cfg.TraceURL, "{trace_id}", "x"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(cfg.TraceURL, "{trace_id}") {
			return nil, fmt.Errorf("console: invalid trace URL %q: want an http(s) URL with {trace_id} in it", cfg.TraceURL)
		}
	}
	hosts, err := newHostPolicy(cfg.Listen, cfg.Hosts)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.MaxLive <= 0 {
		cfg.MaxLive = 16
	}
	if cfg.LivePoll <= 0 {
		cfg.LivePoll = 2 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	key := []byte(cfg.Token)
	if cfg.Token == "" {
		// No token: the CSRF token is still unguessable, per process.
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
	}
	c := &Console{cfg: cfg, live: make(chan struct{}, cfg.MaxLive), session: mac(key, "taskgate-console-session"), csrf: mac(key, "taskgate-console-csrf"), hosts: hosts,
		refusals: cfg.Logger.Sample(&zerolog.BurstSampler{Burst: 10, Period: time.Second})}
	if c.tmpl, err = parseTemplates(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

func mac(key []byte, what string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(what))
	return hex.EncodeToString(h.Sum(nil))
}

// CheckListen refuses a non-loopback address without a token: the console
// shows every owner's tasks and can cancel them.
func CheckListen(addr, token string) error {
	if token != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid console address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("the console would listen on %s, which is not a loopback address, without a token: give --console-token (or TASKGATE_CONSOLE_TOKEN), or listen on 127.0.0.1", addr)
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static := http.FileServerFS(assets)
	m.Handle("GET /static/", static)
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.login)
	m.HandleFunc("POST /logout", c.logout)
	m.Handle("GET /{$}", c.authed(c.tasks))
	m.Handle("GET /tasks/{id}", c.authed(c.task))
	m.Handle("POST /tasks/{id}/cancel", c.authed(c.cancel))
	m.Handle("GET /tools", c.authed(c.tools))
	m.Handle("GET /trends", c.authed(c.trends))
	m.Handle("GET /replicas", c.authed(c.replicas))
	m.Handle("GET /failures", c.authed(c.failures))
	m.Handle("GET /deliveries", c.authed(c.deliveries))
	m.Handle("POST /deliveries/retry", c.authed(c.retryDelivery))
	m.Handle("GET /live/tasks", c.authed(c.liveTasks))
	m.Handle("GET /live/tasks/{id}", c.authed(c.liveTask))
	c.mux = m
}

// ServeHTTP serves the console with headers that keep its pages out of
// frames, caches and other sites' referrers, to the Hosts it serves and,
// for a change, from its own origin only (guard, host.go).
// Referrer-Policy is same-origin, not no-referrer: under no-referrer a
// browser sends "Origin: null" on the console's own form posts (Fetch
// Standard, "append a request Origin header"), which guard must refuse.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if !c.guard(w, r) {
		return
	}
	c.mux.ServeHTTP(w, r)
}

// how says how a request proved itself: "bearer", "cookie", "open" (no
// token configured) or "" (not at all).
func (c *Console) how(r *http.Request) string {
	if c.cfg.Token == "" {
		return "open"
	}
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, tok, _ := strings.Cut(a, " ")
		if strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(c.cfg.Token)) == 1 {
			return "bearer"
		}
		return ""
	}
	if ck, err := r.Cookie(cookieName); err == nil && subtle.ConstantTimeCompare([]byte(ck.Value), []byte(c.session)) == 1 {
		return "cookie"
	}
	return ""
}

type handler func(w http.ResponseWriter, r *http.Request, how string)

func (c *Console) authed(next handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		how := c.how(r)
		switch {
		case how != "":
			next(w, r, how)
		case r.Header.Get("Authorization") != "" || r.Method != http.MethodGet:
			w.Header().Set("WWW-Authenticate", `Bearer realm="taskgate console"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		default:
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		}
	})
}

// readForm parses a POSTed form of 4 KiB at most, and answers 400 when
// the body is not one.
func readForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return false
	}
	return true
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "login", map[string]any{"Next": safeNext(r.URL.Query().Get("next")), "Failed": false})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if c.cfg.Token == "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(c.cfg.Token)) != 1 {
		c.render(w, http.StatusUnauthorized, "login", map[string]any{"Next": next, "Failed": true})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: c.session, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// OwnerLabel is how the console shows an owner: its kind and the first 12
// hex digits of its SHA-256, as the gateway's logs do, never the owner
// itself (a session id, or a credential's digest).
func OwnerLabel(owner string) string {
	kind, _, found := strings.Cut(owner, ":")
	switch {
	case owner == "anonymous" || kind == "anon":
		kind = "anonymous"
	case !found:
		kind = "other"
	case kind == "auth" || kind == "principal" || kind == "session":
	default:
		kind = "other"
	}
	sum := sha256.Sum256([]byte(owner))
	return kind + ":" + hex.EncodeToString(sum[:6])
}
