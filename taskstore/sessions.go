package taskstore

// Client sessions and the tool catalogue: what the gateway learns from an
// upstream's initialize and tools/list answers and every replica must know.
//
//	<prefix>:session:<sha>   HASH  id, cv, uv, caps, created, fb (MarkSessionFallback);
//	                               PEXPIRE ttl (TouchSession renews)
//	<prefix>:tools           HASH  tool name -> execution.taskSupport the upstream declared ("" = none),
//	                               or {"taskSupport":…,"annotations":{…}} for a tool with annotations
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
	// ClientInfo is the client's clientInfo, verbatim, kept for a session
	// the gateway holds itself in front of a stateless upstream (every
	// request it forwards names the client in _meta); empty otherwise.
	ClientInfo json.RawMessage
	// Principal is whose session it is (a digest of the Authorization that
	// opened it) when the gateway holds it itself; empty otherwise.
	Principal string
	// CreatedAt is when the record was written.
	CreatedAt time.Time
	// Fallback: the session has had a task of the fallback task tools
	// (MarkSessionFallback), so its tools/list shows them.
	Fallback bool
	// LogLevel is the level the client set with logging/setLevel, and
	// Subscriptions the resources it subscribed to, sorted, for a session
	// the gateway holds itself (session_state.go).
	LogLevel      string
	Subscriptions []string
	// Address is the client address that opened a session the gateway
	// holds without Authorization (its place in the anonymous caps).
	Address string
}

// Session hash fields.
const (
	fSessID      = "id"
	fSessClient  = "cv"
	fSessUp      = "uv"
	fSessCaps    = "caps"
	fSessCreated = "created"
	fSessFallbk  = "fb"
	fSessInfo    = "ci"
	fSessPrinc   = "pr"
	fSessAddr    = "ad"
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
		fields := []any{fSessID, sess.ID, fSessClient, sess.ClientVersion, fSessUp, sess.UpstreamVersion,
			fSessCaps, string(caps), fSessCreated, s.nowMS()}
		if len(sess.ClientInfo) > 0 {
			fields = append(fields, fSessInfo, string(sess.ClientInfo))
		}
		if sess.Principal != "" {
			fields = append(fields, fSessPrinc, sess.Principal)
		}
		if sess.Address != "" {
			fields = append(fields, fSessAddr, sess.Address)
		}
		p.HSet(ctx, key, fields...)
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
	level, subs := sessionState(m)
	return &Session{
		LogLevel:           level,
		Subscriptions:      subs,
		Address:            m[fSessAddr],
		ID:                 id,
		ClientVersion:      m[fSessClient],
		UpstreamVersion:    m[fSessUp],
		ClientCapabilities: json.RawMessage(m[fSessCaps]),
		ClientInfo:         rawOrNil(m[fSessInfo]),
		Principal:          m[fSessPrinc],
		CreatedAt:          fromMS(created),
		Fallback:           m[fSessFallbk] != "",
	}, nil
}

// markFallbackCmd sets the fb field of an existing session record; it
// never creates a record (one without id and expiry would linger). Reply:
// 1 newly set, 0 already set, -1 no record.
var markFallbackCmd = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return redis.call('HSETNX', KEYS[1], 'fb', '1')
`)

// MarkSessionFallback records that session id has had a fallback task.
// It reports whether this call was the first to mark it; ErrNoSession when
// there is no record.
func (s *Store) MarkSessionFallback(ctx context.Context, id string) (bool, error) {
	n, err := markFallbackCmd.Run(ctx, s.rdb, []string{s.k.session(id)}).Int()
	switch {
	case err != nil:
		return false, fmt.Errorf("taskstore: mark session %s: %w", id, classify(ctx, err))
	case n < 0:
		return false, fmt.Errorf("taskstore: mark session %s: %w", id, ErrNoSession)
	}
	return n == 1, nil
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

// ToolInfo is what the catalogue holds about one tool, as the upstream
// declared it in tools/list.
type ToolInfo struct {
	// TaskSupport is execution.taskSupport, "" when absent.
	TaskSupport string
	// Annotations is the tool's annotations object verbatim, nil when absent.
	Annotations json.RawMessage
	// OutputSchema: the tool declares an outputSchema, so its results'
	// structuredContent must match it.
	OutputSchema bool
}

// encodeTool is a catalogue value: the bare taskSupport when the tool has
// no annotations and no outputSchema (so the common case stays readable in
// redis-cli), else {"taskSupport":…,"annotations":…,"output":true}. A
// taskSupport never starts with "{".
func encodeTool(t ToolInfo) string {
	if len(t.Annotations) == 0 && !t.OutputSchema {
		return t.TaskSupport
	}
	b, err := json.Marshal(catalogValue{t.TaskSupport, t.Annotations, t.OutputSchema})
	if err != nil { // annotations that are not JSON: keep what matters most
		b, _ = json.Marshal(catalogValue{TaskSupport: t.TaskSupport, Output: t.OutputSchema})
	}
	return string(b)
}

// catalogValue is a catalogue value in its JSON form.
type catalogValue struct {
	TaskSupport string          `json:"taskSupport"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Output      bool            `json:"output,omitempty"`
}

func decodeTool(v string) ToolInfo {
	if len(v) == 0 || v[0] != '{' {
		return ToolInfo{TaskSupport: v}
	}
	var t catalogValue
	if json.Unmarshal([]byte(v), &t) != nil {
		return ToolInfo{}
	}
	return ToolInfo{TaskSupport: t.TaskSupport, Annotations: t.Annotations, OutputSchema: t.Output}
}

// SetTools records what the upstream declared per tool. Other tools are
// kept.
func (s *Store) SetTools(ctx context.Context, tools map[string]ToolInfo) error {
	if len(tools) == 0 {
		return nil
	}
	args := make([]interface{}, 0, 2*len(tools))
	for name, t := range tools {
		args = append(args, name, encodeTool(t))
	}
	if err := s.rdb.HSet(ctx, s.k.tools(), args...).Err(); err != nil {
		return fmt.Errorf("taskstore: set tool catalogue: %w", classify(ctx, err))
	}
	return nil
}

// Tool returns what the catalogue holds about tool, and whether the tool
// is in it at all.
func (s *Store) Tool(ctx context.Context, tool string) (ToolInfo, bool, error) {
	v, err := s.rdb.HGet(ctx, s.k.tools(), tool).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return ToolInfo{}, false, nil
	case err != nil:
		return ToolInfo{}, false, fmt.Errorf("taskstore: tool %q: %w", tool, classify(ctx, err))
	}
	return decodeTool(v), true, nil
}

// rawOrNil is v as raw JSON, nil when empty.
func rawOrNil(v string) json.RawMessage {
	if v == "" {
		return nil
	}
	return json.RawMessage(v)
}

// serverTasksField is the field of the tools hash that records whether the
// upstream declares task-augmented tools/call (its capabilities.tasks).
const serverTasksField = "\x00server-tasks"

// SetUpstreamTasks records whether the upstream, as its last initialize
// said, declares task-augmented tools/call (MCP 2025-11-25,
// capabilities.tasks.requests.tools.call).
func (s *Store) SetUpstreamTasks(ctx context.Context, declared bool) error {
	v := "0"
	if declared {
		v = "1"
	}
	if err := s.rdb.HSet(ctx, s.k.tools(), serverTasksField, v).Err(); err != nil {
		return fmt.Errorf("taskstore: set upstream tasks: %w", classify(ctx, err))
	}
	return nil
}

// UpstreamTasks returns what SetUpstreamTasks recorded; known is false
// when nothing was.
func (s *Store) UpstreamTasks(ctx context.Context) (declared, known bool, err error) {
	v, err := s.rdb.HGet(ctx, s.k.tools(), serverTasksField).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, false, nil
	case err != nil:
		return false, false, fmt.Errorf("taskstore: upstream tasks: %w", classify(ctx, err))
	}
	return v == "1", true, nil
}
