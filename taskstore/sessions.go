package taskstore

// Client sessions and the tool catalogue: what the gateway learns from an
// upstream's initialize and tools/list answers and every replica must know.
//
//	<prefix>:session:<sha>   HASH  id, cv, uv, caps, created; PEXPIRE ttl (TouchSession renews)
//	<prefix>:tools           HASH  tool name -> execution.taskSupport the upstream declared ("" = none)
//
// <sha> is 32 hex digits of SHA-256(session id): session ids are the
// upstream's (any visible ASCII, of any length), so hashing keeps braces out
// of key names (no accidental Cluster hash tag) and bounds the key length.
// Each operation touches one key, so Cluster needs no hash tag.
//
// The tool catalogue has no expiry: it holds one short field per tool name
// the upstream ever listed, and a key prefix fronts one upstream.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoSession: no record of this session (never recorded, expired, or
// deleted).
var ErrNoSession = errors.New("taskstore: session not found")

// Session is what one client session negotiated at initialize.
type Session struct {
	// ID is the upstream's Mcp-Session-Id.
	ID string
	// ClientVersion is the protocol version presented to the client.
	ClientVersion string
	// UpstreamVersion is the version the upstream chose.
	UpstreamVersion string
	// ClientCapabilities are the capabilities the client declared, verbatim.
	ClientCapabilities json.RawMessage
	// CreatedAt is when the record was written.
	CreatedAt time.Time
}

// Session hash fields.
const (
	fSessID      = "id"
	fSessClient  = "cv"
	fSessUp      = "uv"
	fSessCaps    = "caps"
	fSessCreated = "created"
)

// session is a session's record: <prefix>:session:<sha256(id)[:32 hex]>.
func (k keys) session(id string) string { return k.prefix + ":session:" + ownerTag(id) }

// tools is the tool catalogue hash: <prefix>:tools.
func (k keys) tools() string { return k.prefix + ":tools" }

// PutSession records sess, replacing any earlier record of its id, to
// expire after ttl unless TouchSession renews it. One MULTI/EXEC round trip.
func (s *Store) PutSession(ctx context.Context, sess Session, ttl time.Duration) error {
	if sess.ID == "" {
		return errors.New("taskstore: put session: empty session id")
	}
	key := s.k.session(sess.ID)
	caps := sess.ClientCapabilities
	if len(caps) == 0 {
		caps = json.RawMessage("{}")
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.HSet(ctx, key, fSessID, sess.ID, fSessClient, sess.ClientVersion, fSessUp, sess.UpstreamVersion,
			fSessCaps, string(caps), fSessCreated, s.nowMS())
		p.PExpire(ctx, key, ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("taskstore: put session %s: %w", sess.ID, classify(ctx, err))
	}
	return nil
}

// GetSession returns the record of session id, or ErrNoSession.
func (s *Store) GetSession(ctx context.Context, id string) (*Session, error) {
	m, err := s.rdb.HGetAll(ctx, s.k.session(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("taskstore: get session %s: %w", id, classify(ctx, err))
	}
	// The id field guards against a (128-bit) digest collision and against a
	// record some other writer left half made.
	if m[fSessID] != id || m[fSessClient] == "" {
		return nil, fmt.Errorf("taskstore: get session %s: %w", id, ErrNoSession)
	}
	created, _ := strconv.ParseInt(m[fSessCreated], 10, 64)
	return &Session{
		ID:                 id,
		ClientVersion:      m[fSessClient],
		UpstreamVersion:    m[fSessUp],
		ClientCapabilities: json.RawMessage(m[fSessCaps]),
		CreatedAt:          fromMS(created),
	}, nil
}

// TouchSession renews the record's expiry to ttl from now. It reports false
// when there is no record (it expired or was deleted); it never creates one.
func (s *Store) TouchSession(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	ok, err := s.rdb.PExpire(ctx, s.k.session(id), ttl).Result()
	if err != nil {
		return false, fmt.Errorf("taskstore: touch session %s: %w", id, classify(ctx, err))
	}
	return ok, nil
}

// DeleteSession removes the record of session id; a missing one is no error.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := s.rdb.Del(ctx, s.k.session(id)).Err(); err != nil {
		return fmt.Errorf("taskstore: delete session %s: %w", id, classify(ctx, err))
	}
	return nil
}

// SetToolTaskSupport records, per tool name, the execution.taskSupport the
// upstream declared ("" when it declared none). Other tools are kept.
func (s *Store) SetToolTaskSupport(ctx context.Context, declared map[string]string) error {
	if len(declared) == 0 {
		return nil
	}
	args := make([]interface{}, 0, 2*len(declared))
	for tool, ts := range declared {
		args = append(args, tool, ts)
	}
	if err := s.rdb.HSet(ctx, s.k.tools(), args...).Err(); err != nil {
		return fmt.Errorf("taskstore: set tool catalogue: %w", classify(ctx, err))
	}
	return nil
}

// ToolTaskSupport returns the execution.taskSupport recorded for tool, and
// whether the tool is in the catalogue at all.
func (s *Store) ToolTaskSupport(ctx context.Context, tool string) (string, bool, error) {
	v, err := s.rdb.HGet(ctx, s.k.tools(), tool).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("taskstore: tool %q: %w", tool, classify(ctx, err))
	}
	return v, true, nil
}
