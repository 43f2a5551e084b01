package taskstore

// Gateway-held upstream sessions. A 2026-07-28 client has no session, but a
// legacy (2025-11-25 and older) upstream needs one: the gateway initializes
// an upstream session per owner and records it here, so every replica calls
// on the same one (docs/ARCHITECTURE.md, "The upstream side").
//
//	<prefix>:{<o>}:held   HASH  sid, pv, init, created; PEXPIRE ttl (TouchOwnerSession renews)
//
// {o} is the owner's hash tag (keys.go): the record sits in its owner's
// slot, next to the owner's tasks. Replacing a session the upstream forgot
// is a compare-and-swap on sid (swapHeldCmd), so replicas that see the
// same 404 at once agree on one new session.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// OwnerSession is an upstream session the gateway holds for one owner.
type OwnerSession struct {
	// SessionID is the upstream's Mcp-Session-Id.
	SessionID string
	// ProtocolVersion is the version the upstream chose at initialize.
	ProtocolVersion string
	// Init is the upstream's initialize result, verbatim (capabilities,
	// serverInfo, instructions).
	Init json.RawMessage
	// CreatedAt is when the record was written.
	CreatedAt time.Time
}

// Held session hash fields.
const (
	fHeldSID     = "sid"
	fHeldVersion = "pv"
	fHeldInit    = "init"
	fHeldCreated = "created"
)

// held is the owner's held session: <prefix>:{<owner>}:held.
func (k keys) held(owner string) string { return k.ownerBase(owner) + ":held" }

// swapHeldCmd records a held session if the record still holds the session
// the caller replaces, or holds none.
//
// KEYS[1] -> <prefix>:{<owner>}:held
// ARGV[1] -> the session id the caller replaces ("" when it saw none)
// ARGV[2] -> new session id
// ARGV[3] -> its protocol version
// ARGV[4] -> its initialize result
// ARGV[5] -> now, unix ms
// ARGV[6] -> ttl ms
//
// Returns {0} recorded, or {6, sid, pv, init, created}: the record holds
// another session (written by another replica), which stays.
var swapHeldCmd = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'sid')
if cur and cur ~= '' and cur ~= ARGV[1] then
  local h = redis.call('HMGET', KEYS[1], 'sid', 'pv', 'init', 'created')
  return {6, h[1], h[2] or '', h[3] or '', h[4] or '0'}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'sid', ARGV[2], 'pv', ARGV[3], 'init', ARGV[4], 'created', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return {0}
`)

// PutOwnerSession records next as owner's held session, to expire after ttl
// unless TouchOwnerSession renews it, provided the record still holds the
// session replaced ("" for none) or holds none. It returns the session in
// force afterwards and whether it is next: false means another replica
// recorded its own first, and the caller should use that one (and close
// its own upstream session).
func (s *Store) PutOwnerSession(ctx context.Context, owner string, next OwnerSession, replaced string, ttl time.Duration) (*OwnerSession, bool, error) {
	if next.SessionID == "" {
		return nil, false, errors.New("taskstore: put held session: empty session id")
	}
	init := next.Init
	if len(init) == 0 {
		init = json.RawMessage("{}")
	}
	now := s.nowMS()
	vals, err := s.run(ctx, swapHeldCmd, []string{s.k.held(owner)},
		replaced, next.SessionID, next.ProtocolVersion, string(init), now, ttl.Milliseconds())
	if err != nil {
		return nil, false, fmt.Errorf("taskstore: put held session: %w", err)
	}
	switch code(vals) {
	case codeOK:
		out := next
		out.Init = init
		out.CreatedAt = fromMS(now)
		return &out, true, nil
	case codeExists:
		if len(vals) < 5 {
			return nil, false, errors.New("taskstore: put held session: short script reply")
		}
		str := func(v interface{}) string { s, _ := v.(string); return s }
		created, _ := strconv.ParseInt(str(vals[4]), 10, 64)
		return &OwnerSession{SessionID: str(vals[1]), ProtocolVersion: str(vals[2]),
			Init: json.RawMessage(str(vals[3])), CreatedAt: fromMS(created)}, false, nil
	}
	return nil, false, fmt.Errorf("taskstore: put held session: %w", codeErr(code(vals), detail(vals)))
}

// GetOwnerSession returns owner's held session, or ErrNoSession.
func (s *Store) GetOwnerSession(ctx context.Context, owner string) (*OwnerSession, error) {
	m, err := s.rdb.HGetAll(ctx, s.k.held(owner)).Result()
	if err != nil {
		return nil, fmt.Errorf("taskstore: get held session: %w", classify(ctx, err))
	}
	if m[fHeldSID] == "" {
		return nil, fmt.Errorf("taskstore: get held session: %w", ErrNoSession)
	}
	created, _ := strconv.ParseInt(m[fHeldCreated], 10, 64)
	return &OwnerSession{
		SessionID:       m[fHeldSID],
		ProtocolVersion: m[fHeldVersion],
		Init:            json.RawMessage(m[fHeldInit]),
		CreatedAt:       fromMS(created),
	}, nil
}

// TouchOwnerSession renews the expiry of owner's held session to ttl from
// now. It reports false when there is no record; it never creates one.
func (s *Store) TouchOwnerSession(ctx context.Context, owner string, ttl time.Duration) (bool, error) {
	ok, err := s.rdb.PExpire(ctx, s.k.held(owner), ttl).Result()
	if err != nil {
		return false, fmt.Errorf("taskstore: touch held session: %w", classify(ctx, err))
	}
	return ok, nil
}
