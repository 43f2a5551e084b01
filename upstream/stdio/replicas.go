package stdio

// Sessions follow their child across replicas. With a child per session
// (PerSession) a session lives on the replica that started its child.
// Everything reaches a Bridge through its handler (Transport in process,
// HopHandler over the network), so that is where a request for a session
// of another replica is sent on:
//
//	replica B (the request landed here)          replica A (runs the child)
//	Transport ─▶ ServeHTTP ─▶ forward:
//	  session not here ─▶ Directory: A's URL
//	  POST/GET/DELETE, signed ──── HTTP ────▶ HopHandler: signature checked,
//	                                          the request marked as hopped
//	  the answer streamed back ◀── SSE ────── ServeHTTP: the session's own
//	                                          answer, GET stream, DELETE
//
// A hopped request is served where it lands, never sent on again (no
// loops). No record, a record naming this replica, or an owner that does
// not answer: the request is served here, where the session is unknown, so
// the client gets 404 for it, as from a restarted server (MCP 2025-11-25,
// Transports, "Session Management": a 404 tells the client to initialize
// anew). Each replica records the sessions it opens, renews the records
// while they live and removes them when they end; a replica that dies
// leaves records that expire after TTL.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Directory records which replica runs each session's child. It is safe
// for concurrent use; taskstore.Store implements it on Redis.
type Directory interface {
	// PutSessionReplica records that session id's child runs on the
	// replica reached at url, for ttl.
	PutSessionReplica(ctx context.Context, id, url string, ttl time.Duration) error
	// SessionReplica is the URL recorded for session id, "" when none.
	SessionReplica(ctx context.Context, id string) (string, error)
	// RenewSessionReplicas extends the records of ids to ttl from now and
	// returns those that have none; it creates none.
	RenewSessionReplicas(ctx context.Context, ids []string, ttl time.Duration) ([]string, error)
	// RemoveSessionReplicas deletes the records of ids.
	RemoveSessionReplicas(ctx context.Context, ids []string) error
	// ReleaseSessionReplicas deletes the records of ids that name the
	// replica at url: a claim another replica took over stays that
	// replica's (principal.go).
	ReleaseSessionReplicas(ctx context.Context, ids []string, url string) error
	// ClaimSessionReplica records that id's child runs on the replica at
	// url, for ttl, unless another replica's record is there, in one
	// atomic step; a record naming from (a replica found gone; "" for
	// none) is taken over. It returns the URL the record names
	// afterwards: url when the claim holds. A principal's child is
	// claimed, so that two replicas never both start one (principal.go).
	ClaimSessionReplica(ctx context.Context, id, url, from string, ttl time.Duration) (string, error)
}

// Replicas configure how sessions follow their child (Bridge.JoinReplicas).
type Replicas struct {
	// Directory is where sessions are recorded and looked up. Required.
	Directory Directory
	// URL is this replica's base URL as the other replicas reach it
	// (scheme://host:port); the hop goes to URL + HopPath. Required.
	URL string
	// Secret signs and checks the hop; every replica has the same.
	// Required, at least 16 bytes.
	Secret []byte
	// TTL is how long a record outlives its last renewal (renewed every
	// TTL/3): how long a dead replica's sessions stay recorded. Zero means
	// DefaultRecordTTL.
	TTL time.Duration
	// MaxSkew is how far a hop's timestamp may be from this replica's
	// clock, either way: a captured hop can be replayed only this long.
	// Zero means DefaultMaxSkew.
	MaxSkew time.Duration
	// TLS configures the hop to https replicas. Nil: the system's roots.
	TLS *tls.Config
	// Client sends the hop. Nil: a client that gives up connecting after
	// 5 s and has no overall timeout (a call's stream lasts as the call),
	// with TLS.
	Client *http.Client
}

// Defaults of Replicas, and the hop's path.
const (
	DefaultRecordTTL = time.Minute
	DefaultMaxSkew   = 30 * time.Second
	// HopPath is where a replica serves the hop (HopHandler), on the
	// gateway's listener.
	HopPath = "/_taskgate/stdio-hop"
	// directoryTimeout bounds one directory operation.
	directoryTimeout = 5 * time.Second
)

// replicas is a Bridge's membership: its settings and the goroutine that
// renews its records and removes those of ended sessions.
type replicas struct {
	Replicas
	quit chan struct{} // closed by leave
	done chan struct{} // closed when follow returns
	once sync.Once

	mu    sync.Mutex
	ended []string // sessions ended, their records not yet removed
	// released are the records of principals' children stopped here
	// (principalRecord), not yet released: each is deleted only if it
	// still names this replica, as another may have taken it over.
	released []string
	kick     chan struct{} // ended or released grew

	seen    seenHops     // hops accepted here, to refuse a replay (hop.go)
	lastHop atomic.Int64 // the t (unix ms) of the last hop signed here
}

// hopTime is the t of a hop signed at now: later than any signed here
// before, so that two identical requests forwarded within a millisecond
// get distinct MACs, and the receiver does not take the second for a
// replay.
func (rp *replicas) hopTime(now time.Time) time.Time {
	for {
		last, t := rp.lastHop.Load(), now.UnixMilli()
		if t <= last {
			t = last + 1
		}
		if rp.lastHop.CompareAndSwap(last, t) {
			return time.UnixMilli(t)
		}
	}
}

// JoinReplicas makes this Bridge record its sessions in r.Directory and
// send a request for a session it does not have to the replica that
// does. Call it once, before the Bridge serves clients, and leave (the
// returned function) before r.Directory closes: it stops the renewals and
// removes this replica's records. Only a Bridge with a child per session
// has sessions to share.
func (b *Bridge) JoinReplicas(r Replicas) (leave func(context.Context), err error) {
	switch {
	case !b.PerSession():
		return nil, errors.New("stdio: sessions follow their child only with a child per session (not with a shared child, nor a 2026-07-28 one)")
	case r.Directory == nil:
		return nil, errors.New("stdio: replicas: no directory")
	case len(r.Secret) < 16:
		return nil, errors.New("stdio: replicas: the hop secret is shorter than 16 bytes")
	}
	if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("stdio: replicas: %q is not an http(s) URL with a host", r.URL)
	}
	if r.TTL <= 0 {
		r.TTL = DefaultRecordTTL
	}
	if r.MaxSkew <= 0 {
		r.MaxSkew = DefaultMaxSkew
	}
	if r.Client == nil {
		r.Client = &http.Client{Transport: &http.Transport{
			Proxy:               nil, // replicas talk directly
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout: 5 * time.Second,
			TLSClientConfig:     r.TLS,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	rp := &replicas{Replicas: r, quit: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1)}
	b.mu.Lock() // Close waits for follow only if it starts before Close
	switch {
	case b.closed:
		b.mu.Unlock()
		return nil, errors.New("stdio: replicas: the bridge is closed")
	case !b.rep.CompareAndSwap(nil, rp):
		b.mu.Unlock()
		return nil, errors.New("stdio: replicas: joined already")
	}
	b.wg.Add(1)
	b.mu.Unlock()
	b.renew(rp) // sessions opened before (none, as a rule) are recorded now
	go b.follow(rp)
	return rp.leave(b), nil
}

// left reports whether leave was called.
func (rp *replicas) left() bool {
	select {
	case <-rp.quit:
		return true
	default:
		return false
	}
}

// leave stops rp's goroutine and removes the records of the sessions
// still open here: the replica is going away.
func (rp *replicas) leave(b *Bridge) func(context.Context) {
	return func(ctx context.Context) {
		rp.once.Do(func() { close(rp.quit) })
		<-rp.done
		ids, keys := b.localSessions()
		principals := make([]string, 0, len(keys)+len(rp.released))
		for _, key := range keys {
			principals = append(principals, principalRecord(key))
		}
		rp.mu.Lock()
		ids = append(ids, rp.ended...)
		principals = append(principals, rp.released...)
		rp.ended, rp.released = nil, nil
		rp.mu.Unlock()
		rp.remove(ctx, b, ids, principals)
	}
}

// follow renews this replica's records every TTL/3 and removes those of
// ended sessions as they end, until leave or Close.
func (b *Bridge) follow(rp *replicas) {
	defer b.wg.Done()
	defer close(rp.done)
	t := time.NewTicker(rp.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-rp.quit:
			return
		case <-b.stop:
			return
		case <-t.C:
			b.renew(rp)
		case <-rp.kick:
			rp.mu.Lock()
			ids, principals := rp.ended, rp.released
			rp.ended, rp.released = nil, nil
			rp.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), directoryTimeout)
			rp.remove(ctx, b, ids, principals)
			cancel()
		}
	}
}

// remove deletes the records of sessions ids and releases the claims
// principals (principalRecord) of this replica.
func (rp *replicas) remove(ctx context.Context, b *Bridge, ids, principals []string) {
	if err := rp.Directory.RemoveSessionReplicas(ctx, ids); err != nil {
		b.log.Warn().Str("op", "stdio").Err(err).Int("sessions", len(ids)).Msg("cannot remove the records of ended sessions; they expire on their own")
	}
	if len(principals) == 0 {
		return
	}
	if err := rp.Directory.ReleaseSessionReplicas(ctx, principals, rp.URL); err != nil {
		b.log.Warn().Str("op", "stdio").Err(err).Int("principals", len(principals)).Msg("cannot remove the records of principals' upstream processes stopped here; they expire on their own")
	}
}

// renew extends the records of this replica's sessions, and puts back
// those that are missing (lost by Redis, or never written); the claims of
// the principals' children here are renewed as claims, so that a record
// another replica took over (this one did not answer) stays that one's,
// and the child here takes none of that principal's new sessions.
func (b *Bridge) renew(rp *replicas) {
	ctx, cancel := context.WithTimeout(context.Background(), directoryTimeout)
	defer cancel()
	ids, keys := b.localSessions()
	missing, err := rp.Directory.RenewSessionReplicas(ctx, ids, rp.TTL)
	for _, id := range missing {
		if err == nil {
			err = rp.Directory.PutSessionReplica(ctx, id, rp.URL, rp.TTL)
		}
	}
	if err != nil {
		b.log.Warn().Str("op", "stdio").Err(err).Msg("cannot renew this replica's session records: other replicas may answer 404 for its sessions")
	}
	for _, key := range keys {
		b.recordPrincipal(rp, key)
	}
}

// localSessions are the ids of the sessions whose child runs here, and
// the principals whose children run here, those being started included.
func (b *Bridge) localSessions() (ids, keys []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids = make([]string, 0, len(b.sessions))
	for id, s := range b.sessions {
		if !s.adopted {
			ids = append(ids, id)
		}
	}
	for key := range b.fleet.principals {
		keys = append(keys, key)
	}
	return ids, keys
}

// recordPrincipal claims (or renews) the record (principalRecord) of
// principal key's child running here, so that its sessions opened on
// other replicas hop here. A failure is logged, not refused: the sessions
// work here, and the renewal claims the record again. A record another
// replica holds stays that replica's: this child serves the sessions it
// has, and the principal's new sessions go there (the child is marked
// elsewhere: forwardPrincipal sends them on), until this replica holds
// the claim again.
func (b *Bridge) recordPrincipal(rp *replicas, key string) {
	if rp == nil || rp.left() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), directoryTimeout)
	defer cancel()
	owner, err := rp.Directory.ClaimSessionReplica(ctx, principalRecord(key), rp.URL, "", rp.TTL)
	if err == nil {
		b.fleet.claimed(key, owner == rp.URL)
	}
	switch {
	case err != nil:
		b.log.Warn().Str("op", "stdio").Err(err).Msg("cannot record a principal's upstream process for the other replicas; they may start one of their own")
	case owner != rp.URL:
		b.log.Warn().Str("op", "stdio").Str("owner", owner).
			Msg("another replica holds the record of a principal's upstream process running here: the principal's new sessions go there")
	}
}

// principalEnded queues the release of the record of principal key's
// child, with b.mu held: deleted only if it still names this replica (a
// replica that took the claim over from this one keeps it).
func (b *Bridge) principalEnded(key string) {
	rp := b.rep.Load()
	if rp == nil || b.fleet.principals[key] != nil {
		return // another child of key runs here already: its record stays
	}
	rp.mu.Lock()
	rp.released = append(rp.released, principalRecord(key))
	rp.mu.Unlock()
	select {
	case rp.kick <- struct{}{}:
	default:
	}
}

// recordSession records a session opened here before its id is shown
// (docs/ARCHITECTURE.md, invariant 9): a session the other replicas
// cannot find would be a 404 there.
func (b *Bridge) recordSession(id string) error {
	rp := b.rep.Load()
	if rp == nil || rp.left() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), directoryTimeout)
	defer cancel()
	if err := rp.Directory.PutSessionReplica(ctx, id, rp.URL, rp.TTL); err != nil {
		b.log.Warn().Str("op", "stdio").Err(err).Msg("cannot record a new session for the other replicas; it is refused")
		return errors.New("cannot record the session for the other replicas: the store is unavailable")
	}
	return nil
}

// sessionEnded queues the removal of an ended session's record. It is
// called with b.mu held, so it never waits.
func (b *Bridge) sessionEnded(s *session) {
	rp := b.rep.Load()
	if rp == nil || s.adopted {
		return
	}
	rp.mu.Lock()
	rp.ended = append(rp.ended, s.id)
	rp.mu.Unlock()
	select {
	case rp.kick <- struct{}{}:
	default:
	}
}

// hopKey marks a request that arrived over the hop.
type hopKey struct{}

func hopped(ctx context.Context) bool { return ctx.Value(hopKey{}) != nil }

// forward sends r on to the replica running its session's child, when
// that is another replica, and reports whether it did (then the answer is
// written). Otherwise r is served here.
func (b *Bridge) forward(w http.ResponseWriter, r *http.Request) bool {
	rp := b.rep.Load()
	id := r.Header.Get("Mcp-Session-Id")
	if rp == nil || id == "" || hopped(r.Context()) || !validSessionID(id) {
		return false
	}
	b.mu.Lock()
	_, here := b.sessions[id]
	b.mu.Unlock()
	if here {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), directoryTimeout)
	owner, err := rp.Directory.SessionReplica(ctx, id)
	cancel()
	switch {
	case err != nil && r.Context().Err() != nil:
		return true // the client went away
	case err != nil:
		b.log.Warn().Str("op", "stdio").Err(err).Msg("cannot look up the replica of a session")
		jsonError(w, http.StatusServiceUnavailable, nil, -32603, "cannot find where this session's upstream process runs: the store is unavailable")
		return true
	case owner == "":
		return false // no such session anywhere: 404 here
	case owner == rp.URL:
		// This replica's record of a session it no longer has (a restart
		// at the same address): 404 here, and the record goes.
		b.sessionEnded(&session{id: id})
		return false
	}
	return b.hopTo(w, r, rp, owner, id, "", nil) == hopServed
}

// hopResult is what became of a request hopTo was to send on.
type hopResult int

const (
	hopServed    hopResult = iota // the answer is written (from the owner, or an error)
	hopNotServed                  // not sent: serve it here
	hopOwnerGone                  // the owner does not answer: serve it here, or try another
)

// hopTo sends r on to owner, the replica the Directory records for id (a
// session's, or a principal's child: principalRecord). principal, for an
// initialize (body read already), names whose child the hop is for
// (hop.go).
func (b *Bridge) hopTo(w http.ResponseWriter, r *http.Request, rp *replicas, owner, id, principal string, body []byte) hopResult {
	var err error
	if r.Method == http.MethodPost && principal == "" {
		if body, err = io.ReadAll(io.LimitReader(r.Body, int64(b.opts.MaxMessage)+1)); err != nil {
			jsonError(w, http.StatusBadRequest, nil, -32700, "cannot read the request body")
			return hopServed
		}
		if len(body) > b.opts.MaxMessage {
			jsonError(w, http.StatusRequestEntityTooLarge, nil, -32600, "message larger than the upstream process accepts")
			return hopServed
		}
		r.Body = io.NopCloser(bytes.NewReader(body)) // served here after all if the owner is gone
		var env envelope
		if json.Unmarshal(body, &env) == nil && env.Method == "initialize" {
			// An initialize opens a new session, whatever session id it
			// carries: it is served here, where its principal is known
			// (a hop by session id carries none; principal.go sends a
			// principal's initialize on itself).
			return hopNotServed
		}
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, owner+HopPath, bytes.NewReader(body))
	if err != nil {
		b.log.Warn().Str("op", "stdio").Err(err).Str("owner", owner).Msg("a session's record names an unusable replica URL")
		return hopNotServed
	}
	for k, vs := range r.Header {
		if !hopByHop[http.CanonicalHeaderKey(k)] {
			req.Header[k] = vs
		}
	}
	if principal != "" {
		req.Header.Del("Mcp-Session-Id")
		req.Header.Set(hopPrincipalHeader, base64.RawURLEncoding.EncodeToString([]byte(principal)))
	}
	rerunHop(r, req) // respawn.go
	req.Header.Set(HopHeader, signHop(rp.Secret, owner, r.Method, hopMACID(id, req.Header.Get(rerunHeader) == "1"), rp.hopTime(time.Now()), body))
	resp, err := rp.Client.Do(req)
	var badCert *tls.CertificateVerificationError
	switch {
	case err != nil && r.Context().Err() != nil:
		return hopServed // the client went away
	case errors.As(err, &badCert):
		// The owner answers, with a certificate this replica does not
		// trust: a configuration fault, and the session may be alive.
		b.log.Error().Str("op", "stdio").Err(err).Str("owner", owner).Msg("the replica running a session's upstream process has a certificate this one does not trust")
		jsonError(w, http.StatusBadGateway, nil, -32603, "cannot reach the replica running this session's upstream process: its TLS certificate is not trusted")
		return hopServed
	case err != nil:
		// The owner is gone (or unreachable): the session went with it.
		b.log.Warn().Str("op", "stdio").Err(err).Str("owner", owner).Msg("the replica running a session's upstream process does not answer; the session is gone")
		return hopOwnerGone
	}
	defer resp.Body.Close()
	if resp.Header.Get(hopErrorHeader) != "" {
		// The owner refused the hop itself: a configuration fault (clocks
		// apart, another secret), not the client's.
		b.log.Error().Str("op", "stdio").Str("owner", owner).Int("status", resp.StatusCode).Str("reason", resp.Header.Get(hopErrorHeader)).
			Msg("the replica running a session's upstream process refused the hop")
		jsonError(w, http.StatusBadGateway, nil, -32603, "the replica running this session's upstream process refused to serve it: "+resp.Header.Get(hopErrorHeader))
		return hopServed
	}
	for k, vs := range resp.Header {
		if !hopByHop[http.CanonicalHeaderKey(k)] {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	copyFlushing(w, resp.Body)
	return hopServed
}

// copyFlushing streams src to w, each piece as it comes (SSE).
func copyFlushing(w http.ResponseWriter, src io.Reader) {
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// hopByHop are the headers not passed on over the hop: those of one
// connection (RFC 9110, section 7.6.1), the length (the body is streamed)
// and the hop's own.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Proxy-Authorization": true, "Proxy-Authenticate": true,
	"Content-Length": true, HopHeader: true, hopErrorHeader: true, hopPrincipalHeader: true,
}

// validSessionID: MCP 2025-11-25, Transports, "Session Management": a
// session id contains only visible ASCII (0x21 to 0x7E). Ours are UUIDs;
// anything else longer than 128 bytes is not worth a lookup.
func validSessionID(id string) bool {
	if len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// PerSession reports whether each session has a child of its own, so
// that sessions can follow their child (JoinReplicas). A shared child has
// none; with a 2026-07-28 child (stateless.go), the sessions of 2025-11-25
// clients each have one, and 2026-07-28 requests, of no session, go to the
// one stateless child of the replica they reach.
func (b *Bridge) PerSession() bool { return !b.opts.Shared }
