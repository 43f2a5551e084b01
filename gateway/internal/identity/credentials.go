package identity

// The freshest token of each principal's client, for the requests the
// gateway makes later on a task's behalf, when no client request carries
// one: asking an upstream's own task for its result again, cancelling it,
// retrying a call with the client's answers. Those use the newest valid
// token the same client (client_id) of the task's principal presented, on
// any replica; the token that created the task is the fallback. Never
// another client's token of the same user: each application's token
// carries the scopes granted to it (RFC 6749 §3.3), and a read-only
// application's task must not run with the user's full-scope one. The
// first request of a call carries the call's own token, the freshest
// there is.
//
// Tokens are kept in the store sealed (AES-256-GCM under the store's
// shared secret "credentials", the principal's client as associated
// data, with the time it was stored, so an older record never replaces a
// token seen later), never
// in clear, and never logged. The store rather than pub/sub between
// replicas: a replica started after a refresh, or one whose subscription
// dropped a message, still finds the newest token; nothing has to be
// resent; and a sealed record expires on its own (credKeep after it was
// last seen). The seal guards the tokens against what shows single
// records (a key dump, SLOWLOG, MONITOR output, logs of the store); it
// cannot guard against a reader of the whole store, which holds the
// secret too, as it holds the tasks' results: restrict access to the
// store (ACLs, TLS) as for the tasks.

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

const (
	// credKeep is how long a stored token outlives the last time a
	// replica stored it.
	credKeep = time.Hour
	// credRestore is how often a replica stores again a token it keeps
	// seeing (renewing credKeep).
	credRestore = 5 * time.Minute
	// credLocal: a token seen on this replica, or read from the store,
	// this recently is used without asking the store.
	credLocal = 2 * time.Second
	// credPrevious bounds the replaced tokens of one client a replica
	// still binds to its freshest one (credEntry.previous).
	credPrevious = 8
	// credEntries bounds the principals' clients a replica remembers.
	credEntries = 4096
	// credTimeout bounds one store request for a token.
	credTimeout = 2 * time.Second
	// credRetry: after a store request for a token failed, this replica
	// waits this long before the next (a store outage must not slow
	// every request by credTimeout).
	credRetry = 10 * time.Second
)

// errSealed is a sealed token that does not open (another secret, or
// another principal's record).
var errSealed = errors.New("a stored token does not open with the shared secret")

// credentialStore is the store's part credentials use.
type credentialStore interface {
	SharedSecret(ctx context.Context, name string) ([]byte, error)
	PutCredential(ctx context.Context, principal string, blob []byte, ttl time.Duration) error
	Credential(ctx context.Context, principal string) ([]byte, error)
}

// Credentials remembers, per principal's client (auth.Principal.ClientKey),
// the newest Authorization seen,
// and stores it sealed for the other replicas. A nil *Credentials does
// nothing (no validation, no store, or tokens not forwarded). Safe for
// concurrent use; it holds no goroutine.
type Credentials struct {
	store credentialStore
	log   zerolog.Logger
	// Now is the clock. Exported for gateway's TestFreshestTokenForLaterCalls,
	// which moves one replica's clock in a fleet of Handlers.
	Now func() time.Time

	sealMu sync.Mutex
	aead   cipher.AEAD // from the shared secret, once read

	mu          sync.Mutex
	byPrincipal map[string]*credEntry          // by ClientKey
	byToken     map[[sha256.Size]byte]tokenRef // the digest of an entry's Authorization, or of one of its previous ones
}

// tokenRef is whose a token is, and when this replica last saw it.
type tokenRef struct {
	key  string // ClientKey
	seen time.Time
}

// credEntry is the newest Authorization of one principal's client this
// replica knows.
type credEntry struct {
	header  string
	seen    time.Time // last sent to this replica
	stored  time.Time // last stored by this replica
	checked time.Time // last read from the store
	// previous are the digests of the credPrevious tokens header replaced,
	// oldest first, kept in byToken so that a call retried with a task's
	// older token is still bound; older ones leave byToken.
	previous [][sha256.Size]byte
}

// NewCredentials returns the credentials kept in store (the shared secret
// "credentials" and the sealed records).
func NewCredentials(store credentialStore, log zerolog.Logger) *Credentials {
	return &Credentials{store: store, log: log, Now: time.Now,
		byPrincipal: map[string]*credEntry{}, byToken: map[[sha256.Size]byte]tokenRef{}}
}

// Note records r's Authorization as its principal's client's newest: in memory at
// once, and in the store when it changed or was stored more than
// credRestore ago. A store that fails costs the other replicas the
// newest token, never the request.
func (c *Credentials) Note(r *http.Request) {
	if c == nil {
		return
	}
	p, ok := auth.FromContext(r.Context())
	v := r.Header.Get("Authorization")
	if !ok || v == "" {
		return
	}
	key, now := p.ClientKey(), c.Now()
	c.mu.Lock()
	e := c.byPrincipal[key]
	if e == nil || e.header != v {
		e = c.replace(key, e, v)
	}
	e.seen = now
	c.byToken[sha256.Sum256([]byte(v))] = tokenRef{key: key, seen: now}
	store := now.Sub(e.stored) >= credRestore
	if store {
		e.stored = now
	}
	c.mu.Unlock()
	if !store {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), credTimeout)
	defer cancel()
	blob, err := c.seal(ctx, key, v, now)
	if err == nil {
		err = c.store.PutCredential(ctx, key, blob, credKeep)
	}
	if err != nil {
		c.mu.Lock()
		e.stored = now.Add(credRetry - credRestore) // try again in credRetry
		c.mu.Unlock()
		c.log.Warn().Str("op", "credentials").Str("owner", core.LogOwner(core.PrincipalPrefix+key)).Err(err).
			Msg("cannot store the newest token: other replicas keep using an older one")
	}
}

// replace makes v the Authorization of key, whose entry was e (nil: none),
// and returns the new entry. The old token's digest joins previous; the
// oldest beyond credPrevious leaves byToken, so byToken holds at most
// credPrevious+1 digests per entry however often a client refreshes.
// Called with c.mu held.
func (c *Credentials) replace(key string, e *credEntry, v string) *credEntry {
	d := sha256.Sum256([]byte(v))
	n := &credEntry{header: v}
	if e != nil {
		old := sha256.Sum256([]byte(e.header))
		for _, p := range e.previous {
			if p != d && p != old {
				n.previous = append(n.previous, p)
			}
		}
		n.previous = append(n.previous, old)
		if len(n.previous) > credPrevious {
			if gone := n.previous[0]; c.byToken[gone].key == key {
				delete(c.byToken, gone)
			}
			n.previous = n.previous[1:]
		}
	} else if len(c.byPrincipal) >= credEntries {
		c.byPrincipal, c.byToken = map[string]*credEntry{}, map[[sha256.Size]byte]tokenRef{} // start over rather than grow
	}
	c.byPrincipal[key] = n
	if ref, ok := c.byToken[d]; !ok || ref.key != key {
		c.byToken[d] = tokenRef{key: key}
	}
	return n
}

// Bind returns sess asking for its principal's client's freshest token on
// every request, when sess carries a token this replica saw with a
// validated principal; else sess itself. The first request of a call
// whose token this replica saw within credLocal (a client's request that
// starts the call now) carries that token: it is the freshest there, and
// the one the client chose for the call. A call started later (a retry
// with the client's answers, a task taken over) gets the freshest from
// its first request on.
func (c *Credentials) Bind(sess *upstream.Session) *upstream.Session {
	if c == nil || sess == nil || sess.Authorization != nil {
		return sess
	}
	v := sess.Header.Get("Authorization")
	if v == "" {
		return sess
	}
	c.mu.Lock()
	ref, ok := c.byToken[sha256.Sum256([]byte(v))]
	c.mu.Unlock()
	if !ok {
		return sess
	}
	bound := *sess
	var later atomic.Bool
	bound.Authorization = func(ctx context.Context) string {
		if !later.Swap(true) && c.Now().Sub(ref.seen) < credLocal {
			return "" // the first request of a call a client starts now: its own token
		}
		return c.Freshest(ctx, ref.key)
	}
	return &bound
}

// Freshest is the newest Authorization of key, a principal's client: this
// replica's when it saw or read it within credLocal, or saw it after the
// store's copy was stored (a store write that failed leaves an older
// one there), else the store's; "" when neither has one (the caller's
// own is then sent).
func (c *Credentials) Freshest(ctx context.Context, key string) string {
	now := c.Now()
	c.mu.Lock()
	var local string
	if e := c.byPrincipal[key]; e != nil {
		local = e.header
		if now.Sub(e.seen) < credLocal || now.Sub(e.checked) < credLocal {
			c.mu.Unlock()
			return local
		}
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), credTimeout)
	defer cancel()
	blob, err := c.store.Credential(ctx, key)
	var v string
	var written time.Time
	if err == nil {
		v, written, err = c.open(ctx, key, blob)
	}
	if err != nil {
		if !errors.Is(err, taskstore.ErrNotFound) {
			c.log.Warn().Str("op", "credentials").Str("owner", core.LogOwner(core.PrincipalPrefix+key)).Err(err).
				Msg("cannot read the newest token: using the one this replica has")
		}
		c.mu.Lock()
		if e := c.byPrincipal[key]; e != nil {
			e.checked = now.Add(credRetry - credLocal) // ask again in credRetry
		}
		c.mu.Unlock()
		return local
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.byPrincipal[key]
	if e != nil && e.header != v && e.seen.After(written) {
		e.checked = now
		return e.header // seen here after the store's copy was written
	}
	if e == nil || e.header != v {
		e = c.replace(key, e, v)
	}
	e.checked = now
	return v
}

// KeyOf is the principal's client whose token auth is, when this replica
// saw it with a validated principal ("" otherwise): the rerun of a durable
// task finds it by the call's token (gateway/durable.go).
func (c *Credentials) KeyOf(auth string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byToken[sha256.Sum256([]byte(auth))].key
}

// cipher is the AEAD of the shared secret "credentials".
func (c *Credentials) cipher(ctx context.Context) (cipher.AEAD, error) {
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	if c.aead != nil {
		return c.aead, nil
	}
	secret, err := c.store.SharedSecret(ctx, "credentials")
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(secret) // 32 bytes: AES-256
	if err != nil {
		return nil, err
	}
	if c.aead, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	return c.aead, nil
}

// seal encrypts token, stored at written, for key: nonce ‖ ciphertext of
// (written in Unix nanoseconds, 8 bytes big-endian ‖ token), with key as
// associated data, so a record moved to another key does not open.
func (c *Credentials) seal(ctx context.Context, key, token string, written time.Time) ([]byte, error) {
	aead, err := c.cipher(ctx)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+8+len(token)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	plain := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(token)), uint64(written.UnixNano()))
	return aead.Seal(nonce, nonce, append(plain, token...), []byte(key)), nil
}

// open is seal's inverse.
func (c *Credentials) open(ctx context.Context, key string, blob []byte) (string, time.Time, error) {
	aead, err := c.cipher(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	if len(blob) < aead.NonceSize() {
		return "", time.Time{}, errSealed
	}
	plain, err := aead.Open(nil, blob[:aead.NonceSize()], blob[aead.NonceSize():], []byte(key))
	if err != nil || len(plain) < 8 {
		return "", time.Time{}, errSealed
	}
	return string(plain[8:]), time.Unix(0, int64(binary.BigEndian.Uint64(plain))), nil
}
