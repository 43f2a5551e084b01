package upstreamside

// A 2026-07-28 client's subscriptions/listen in front of a session
// Upstream (MCP 2026-07-28, "Subscriptions"). A session server has no
// subscriptions/listen: it sends its list changes and resource updates
// on the GET stream of a session (Streamable HTTP 2025-11-25, "Listening
// for Messages from the Server"). So the gateway
//
//	acknowledges at once, granting what the owner session's initialize
//	  result offers (capabilities.tools/prompts/resources.listChanged,
//	  resources.subscribe: the URIs the upstream accepted resources/subscribe
//	  for on the owner session)
//	holds one GET stream per owner session on this replica (a feed),
//	  shared by all of the owner's listen streams here: a server sends
//	  each message on one stream only, and many allow one GET per session
//	  (409 for a second)
//	passes each stream the notifications its filter asked for, tagged with
//	  its subscription id
//
// A feed reopens its GET stream when it ends (the owner session reopened
// when the upstream forgot it), waiting longer after each try that gave
// no stream (405: the upstream has nothing to offer; the listen streams
// then carry the gateway's own task notifications alone). Resource
// subscriptions made on an owner session stay for its life: the filter of
// each listen stream decides what its client sees.
//
// Replicas share an owner session, and so its one GET stream: the feed
// that holds it publishes what it reads on the owner's channel in the
// store; a replica whose GET is refused (409: another holds it) relays
// that channel to its listen streams instead, and tries again now and
// then (feedConflictRetry), to take over when the holder lets go.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// ListenFilter is a subscriptions/listen filter's upstream part
// (SubscriptionFilter in the 2026-07-28 schema; taskIds is the gateway's).
// Its fields are exported for encoding/json: front2026 decodes them from a subscriptions/listen request.
type ListenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

func (f ListenFilter) Empty() bool {
	return !f.ToolsListChanged && !f.PromptsListChanged && !f.ResourcesListChanged && len(f.ResourceSubscriptions) == 0
}

// offered is the part of f a session upstream's initialize result offers.
func (f ListenFilter) offered(init json.RawMessage) ListenFilter {
	type listChanged struct {
		ListChanged bool `json:"listChanged"`
		Subscribe   bool `json:"subscribe"`
	}
	var res struct {
		Capabilities struct {
			Tools, Prompts, Resources listChanged
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(init, &res) // nothing readable: nothing offered
	c := res.Capabilities
	out := ListenFilter{
		ToolsListChanged:     f.ToolsListChanged && c.Tools.ListChanged,
		PromptsListChanged:   f.PromptsListChanged && c.Prompts.ListChanged,
		ResourcesListChanged: f.ResourcesListChanged && c.Resources.ListChanged,
	}
	if c.Resources.Subscribe {
		out.ResourceSubscriptions = f.ResourceSubscriptions
	}
	return out
}

// Wants reports whether a notification of the upstream passes f.
func (f ListenFilter) Wants(method string, params json.RawMessage) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.ToolsListChanged
	case "notifications/prompts/list_changed":
		return f.PromptsListChanged
	case "notifications/resources/list_changed":
		return f.ResourcesListChanged
	case "notifications/resources/updated":
		var p struct {
			URI string `json:"uri"`
		}
		return json.Unmarshal(params, &p) == nil && p.URI != "" && slices.ContainsFunc(f.ResourceSubscriptions, func(s string) bool {
			// "This might be a sub-resource of the one that the client
			// actually subscribed to" (ResourceUpdatedNotificationParams).
			return p.URI == s || strings.HasPrefix(p.URI, strings.TrimSuffix(s, "/")+"/")
		})
	}
	return false
}

// FeedNote is one notification an owner session's GET stream delivered.
type FeedNote struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// maxSubscribeURIs bounds the resource subscriptions one listen makes
// Upstream.
const maxSubscribeURIs = 64

// ListenUpstream subscribes a 2026-07-28 client's listen stream to its
// owner session's notifications on a session upstream: it returns what is
// granted, the notifications (nil when nothing is), a channel closed once
// the feed's GET stream opened (or failed to), and the release to call
// when the stream ends.
func (u *Side) ListenUpstream(ctx context.Context, owner string, auth http.Header, want ListenFilter) (ListenFilter, <-chan FeedNote, <-chan struct{}, func(), error) {
	rec, err := u.OwnerSession(ctx, owner, auth)
	if err != nil {
		return ListenFilter{}, nil, nil, nil, err
	}
	granted := want.offered(rec.Init)
	if n := len(granted.ResourceSubscriptions); n > 0 {
		granted.ResourceSubscriptions = u.subscribeOwner(ctx, ownerTarget(rec, auth), granted.ResourceSubscriptions[:min(n, maxSubscribeURIs)])
	}
	if granted.Empty() {
		return granted, nil, nil, func() {}, nil
	}
	c, ready, release := u.feeds.subscribe(owner, func(ctx context.Context, publish func(FeedNote), ready func()) {
		u.runFeed(ctx, owner, auth, publish, ready)
	})
	return granted, c, ready, release, nil
}

// subscribeOwner sends resources/subscribe for each of uris on the owner
// session of target and returns those the upstream accepted.
func (u *Side) subscribeOwner(ctx context.Context, target *Target, uris []string) []string {
	var ok []string
	for _, uri := range slices.Compact(slices.Sorted(slices.Values(uris))) {
		resp, err := u.client.Call(ctx, target.Session, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "resources/subscribe",
			Params: mcpwire.MustMarshal(map[string]string{"uri": uri})}, upstream.CallOptions{})
		if err == nil && resp.Error == nil {
			ok = append(ok, uri)
		}
	}
	return ok
}

// feedRetry is the first wait before a feed tries its GET stream again;
// each try that gives no stream doubles it, up to MaxListenRetry.
const feedRetry = time.Second

// feedConflictRetry is how often a replica whose GET stream is refused
// because another holds it tries again.
const feedConflictRetry = 5 * time.Second

// feedChannel is the store channel owner's GET stream is shared on.
func feedChannel(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return "listen:" + hex.EncodeToString(sum[:16])
}

// FeedReadyWait bounds how long a listen's acknowledgement waits for its
// feed's GET stream to open.
const FeedReadyWait = 2 * time.Second

// runFeed holds owner's GET stream on its owner session open until ctx
// ends, and publishes the notifications it carries. ready is called once
// the first try opened its stream or failed.
func (u *Side) runFeed(ctx context.Context, owner string, auth http.Header, publish func(FeedNote), ready func()) {
	var holding atomic.Bool
	share := func(FeedNote) {}
	if u.store != nil {
		ch := feedChannel(owner)
		if watch, err := u.store.WatchSession(ctx, ch); err == nil {
			relayed := make(chan struct{})
			defer func() { watch.Close(); <-relayed }()
			go func() { // what the replica holding the GET stream reads
				defer close(relayed)
				for ev := range watch.C {
					var n FeedNote
					if ev.Kind == taskstore.EventMessage && !holding.Load() && json.Unmarshal([]byte(ev.Data), &n) == nil {
						publish(n)
					}
				}
			}()
		}
		share = func(n FeedNote) {
			sctx, cancel := context.WithTimeout(ctx, core.StoreTimeout)
			defer cancel()
			_ = u.store.PublishSession(sctx, ch, mcpwire.MustMarshal(n))
		}
	}
	for quiet := 0; ; quiet++ {
		wait := time.Duration(0)
		switch opened, conflict := u.feedOnce(ctx, owner, auth, func(n FeedNote) { publish(n); share(n) }, &holding, ready); {
		case conflict:
			quiet, wait = 0, feedConflictRetry
		case opened:
			quiet = 0
		}
		ready()
		if wait == 0 {
			wait = min(feedRetry<<min(quiet, 10), MaxListenRetry)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// feedOnce opens owner's GET stream and reads it to its end, holding set
// meanwhile; it reports whether a stream opened (and then calls opened),
// or another holds it (409).
func (u *Side) feedOnce(ctx context.Context, owner string, auth http.Header, publish func(FeedNote), holding *atomic.Bool, opened func()) (ok, conflict bool) {
	target, err := u.Target(ctx, owner, auth, "")
	if err != nil || target.Stateless || target.Session.ID == "" {
		return false, false
	}
	resp, err := u.openGet(ctx, target.Session)
	if err == nil && resp.StatusCode == http.StatusNotFound {
		resp.Body.Close()
		if target, err = u.ReopenTarget(ctx, owner, auth, "", target); err == nil {
			resp, err = u.openGet(ctx, target.Session)
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			u.log.Debug().Str("op", "listen").Err(err).Msg("cannot open the owner session's GET stream; retrying later")
		}
		return false, false
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusConflict {
		return false, true // another replica holds it: its channel is relayed
	}
	if resp.StatusCode != http.StatusOK || !IsStream(resp) {
		u.log.Debug().Str("op", "listen").Int("status", resp.StatusCode).Msg("the upstream gives no GET stream on the owner session; retrying later")
		return false, false
	}
	holding.Store(true)
	defer holding.Store(false)
	opened()
	sr := mcpwire.NewReader(resp.Body, MaxAnswerBytes)
	defer sr.Release()
	for {
		ev, err := sr.Next()
		if err != nil {
			return true, false
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if len(ev.Data) == 0 || json.Unmarshal(ev.Data, &m) != nil || m.Method == "" {
			continue
		}
		if m.ID != nil {
			u.answerOnFeed(ctx, target, m.ID, m.Method)
			continue
		}
		publish(FeedNote{Method: m.Method, Params: m.Params})
	}
}

// openGet opens the GET stream of session s.
func (u *Side) openGet(ctx context.Context, s *upstream.Session) (*http.Response, error) {
	h := make(http.Header, len(s.Header)+3)
	for k, vv := range s.Header {
		h[k] = vv
	}
	h.Set("Accept", "text/event-stream")
	h.Set("Mcp-Session-Id", s.ID)
	if s.ProtocolVersion != "" {
		h.Set("MCP-Protocol-Version", s.ProtocolVersion)
	}
	return u.client.Forward(ctx, http.MethodGet, h, nil)
}

// answerOnFeed answers a request the upstream sent on an owner session's
// GET stream, outside any call: a ping, or a refusal (there is no client
// Call to relay it to).
func (u *Side) answerOnFeed(ctx context.Context, target *Target, rawID json.RawMessage, method string) {
	var v any
	if json.Unmarshal(rawID, &v) != nil {
		return
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		return
	}
	resp := &jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)}
	if method != "ping" {
		resp = &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: mcpwire.CodeMethodNotFound,
			Message: "taskgate cannot relay " + method + " outside a call"}}
	}
	_ = u.client.Respond(ctx, target.Session, resp)
}

// listenFeeds are the feeds this replica runs, one per owner.
type listenFeeds struct {
	mu      sync.Mutex
	m       map[string]*listenFeed
	closing map[string]chan struct{} // a feed that is ending: the next one waits for it
}

type listenFeed struct {
	subs  map[chan FeedNote]struct{}
	stop  context.CancelFunc
	done  chan struct{}
	ready chan struct{} // closed once the first GET stream opened or failed
}

// subscribe adds a subscriber to owner's feed, starting it with run when
// there is none. The release it returns removes it, and ends the feed
// (waiting for it) when it was the last.
func (c *listenFeeds) subscribe(owner string, run func(ctx context.Context, publish func(FeedNote), ready func())) (<-chan FeedNote, <-chan struct{}, func()) {
	ch := make(chan FeedNote, 64)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m, c.closing = map[string]*listenFeed{}, map[string]chan struct{}{}
	}
	f := c.m[owner]
	if f == nil {
		ctx, stop := context.WithCancel(context.Background())
		f = &listenFeed{subs: map[chan FeedNote]struct{}{}, stop: stop, done: make(chan struct{}), ready: make(chan struct{})}
		c.m[owner] = f
		prev := c.closing[owner]
		var once sync.Once
		ready := func() { once.Do(func() { close(f.ready) }) }
		go func() {
			defer close(f.done)
			defer ready()
			if prev != nil {
				select { // one GET stream at a time per session
				case <-prev:
				case <-ctx.Done():
					return
				}
			}
			run(ctx, func(n FeedNote) { c.publish(f, n) }, ready)
		}()
	}
	f.subs[ch] = struct{}{}
	return ch, f.ready, func() { c.release(owner, f, ch) }
}

// publish hands n to every subscriber of f; one that is behind misses it
// (list changes say "read again": the next one says the same).
func (c *listenFeeds) publish(f *listenFeed, n FeedNote) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- n:
		default:
		}
	}
}

func (c *listenFeeds) release(owner string, f *listenFeed, ch chan FeedNote) {
	c.mu.Lock()
	delete(f.subs, ch)
	last := len(f.subs) == 0 && c.m[owner] == f
	if last {
		delete(c.m, owner)
		c.closing[owner] = f.done
	}
	c.mu.Unlock()
	if !last {
		return
	}
	f.stop()
	<-f.done
	c.mu.Lock()
	if c.closing[owner] == f.done {
		delete(c.closing, owner)
	}
	c.mu.Unlock()
}

// MaxListenRetry bounds how long a GET stream without an upstream listen
// stream waits to try again.
const MaxListenRetry = 5 * time.Minute
