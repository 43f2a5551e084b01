package taskstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// What a session the gateway holds itself (in front of a stateless
// upstream) changes after initialize, kept in the session's own hash so it
// lives and expires with it:
//
//	ll            the log level the client set (logging/setLevel)
//	rs:<uri>      a resource the client subscribed to (resources/subscribe)
//	rsn           how many rs: fields there are (bounded)
//	pc:<id>       the task holding the client's plain call with JSON-RPC
//	              id <id>, while it runs (notifications/cancelled names it)
//
// A change is announced on the session's channel (an EventSession), so the
// replica holding the session's GET stream reopens the upstream's
// subscriptions/listen with the new filter, or ends the stream.
const (
	fSessLevel   = "ll"
	fSessSubPfx  = "rs:"
	fSessSubN    = "rsn"
	fSessCallPfx = "pc:"
)

// ErrTooManySubscriptions: the session already has as many resource
// subscriptions as the caller allows.
var ErrTooManySubscriptions = errors.New("taskstore: too many resource subscriptions for the session")

// Session state announcements (Event.Status of an EventSession).
const (
	SessionChanged Status = "changed" // its log level or subscriptions changed
	SessionEnded   Status = "ended"   // the client deleted it
)

// setSessionFieldCmd sets one field of an existing session record (never
// creating one). Reply: 1 set, -1 no record.
var setSessionFieldCmd = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`)

// subscribeCmd adds (ARGV[2]=="1") or removes the subscription field
// ARGV[1] of an existing session record, keeping the count in rsn under
// ARGV[3]. Reply: 1 changed, 0 nothing to change, -1 no record, -2 full.
var subscribeCmd = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local has = redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1
if ARGV[2] == '1' then
  if has then return 0 end
  if tonumber(redis.call('HGET', KEYS[1], 'rsn') or '0') >= tonumber(ARGV[3]) then return -2 end
  redis.call('HSET', KEYS[1], ARGV[1], '1')
  redis.call('HINCRBY', KEYS[1], 'rsn', 1)
  return 1
end
if not has then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'rsn', -1)
return 1
`)

func (s *Store) setSessionField(ctx context.Context, id, field, value string) error {
	n, err := setSessionFieldCmd.Run(ctx, s.rdb, []string{s.k.session(id)}, field, value).Int()
	switch {
	case err != nil:
		return fmt.Errorf("taskstore: update session %s: %w", id, classify(ctx, err))
	case n < 0:
		return fmt.Errorf("taskstore: update session %s: %w", id, ErrNoSession)
	}
	return nil
}

// setLevelCmd sets the ll field of an existing session record. Reply: 1
// changed, 0 already so, -1 no record.
var setLevelCmd = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HGET', KEYS[1], 'll') == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'll', ARGV[1])
return 1
`)

// SetSessionLogLevel records the log level the client of session id set,
// and reports whether it changed.
func (s *Store) SetSessionLogLevel(ctx context.Context, id, level string) (bool, error) {
	n, err := setLevelCmd.Run(ctx, s.rdb, []string{s.k.session(id)}, level).Int()
	switch {
	case err != nil:
		return false, fmt.Errorf("taskstore: update session %s: %w", id, classify(ctx, err))
	case n < 0:
		return false, fmt.Errorf("taskstore: update session %s: %w", id, ErrNoSession)
	}
	return n == 1, nil
}

// SessionLogLevel returns the log level recorded for session id, "" when
// none was set (or there is no record).
func (s *Store) SessionLogLevel(ctx context.Context, id string) (string, error) {
	v, err := s.rdb.HGet(ctx, s.k.session(id), fSessLevel).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("taskstore: session %s log level: %w", id, classify(ctx, err))
	}
	return v, nil
}

// SubscribeSession records (on) or drops a resource subscription of
// session id, at most max of them. It reports whether anything changed;
// ErrTooManySubscriptions when full, ErrNoSession without a record.
func (s *Store) SubscribeSession(ctx context.Context, id, uri string, on bool, max int) (bool, error) {
	flag := "0"
	if on {
		flag = "1"
	}
	n, err := subscribeCmd.Run(ctx, s.rdb, []string{s.k.session(id)}, fSessSubPfx+uri, flag, max).Int()
	switch {
	case err != nil:
		return false, fmt.Errorf("taskstore: subscribe session %s: %w", id, classify(ctx, err))
	case n == -1:
		return false, fmt.Errorf("taskstore: subscribe session %s: %w", id, ErrNoSession)
	case n == -2:
		return false, fmt.Errorf("taskstore: subscribe session %s: %w", id, ErrTooManySubscriptions)
	}
	return n == 1, nil
}

// sessionState reads the mutable fields out of a session record's hash.
func sessionState(m map[string]string) (level string, subs []string) {
	for k := range m {
		if uri, ok := strings.CutPrefix(k, fSessSubPfx); ok {
			subs = append(subs, uri)
		}
	}
	sort.Strings(subs)
	return m[fSessLevel], subs
}

// SetSessionCall records that the client's plain call with JSON-RPC id
// reqID (its JSON text) runs as task taskID.
func (s *Store) SetSessionCall(ctx context.Context, id, reqID, taskID string) error {
	return s.setSessionField(ctx, id, fSessCallPfx+reqID, taskID)
}

// ClearSessionCall forgets the plain call reqID of session id if it still
// names taskID (a later call may reuse the id).
func (s *Store) ClearSessionCall(ctx context.Context, id, reqID, taskID string) error {
	err := clearCallCmd.Run(ctx, s.rdb, []string{s.k.session(id)}, fSessCallPfx+reqID, taskID).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("taskstore: clear session call %s: %w", id, classify(ctx, err))
	}
	return nil
}

var clearCallCmd = redis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 1
`)

// SessionCall returns the task of the plain call reqID of session id, ""
// when none runs.
func (s *Store) SessionCall(ctx context.Context, id, reqID string) (string, error) {
	v, err := s.rdb.HGet(ctx, s.k.session(id), fSessCallPfx+reqID).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("taskstore: session call %s: %w", id, classify(ctx, err))
	}
	return v, nil
}

// AnnounceSession tells whoever watches session id (WatchSession) that its
// state changed or that it ended: an EventSession with what as Status.
func (s *Store) AnnounceSession(ctx context.Context, id string, what Status) error {
	err := s.rdb.Publish(ctx, s.k.sessionChannel(id), string(EventSession)+":"+string(what)).Err()
	if err != nil {
		return fmt.Errorf("taskstore: announce to session: %w", classify(ctx, err))
	}
	return nil
}
