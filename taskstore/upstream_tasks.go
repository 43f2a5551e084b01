package taskstore

// Upstream tasks: tasks an upstream with tasks of its own created (its
// tool declares execution.taskSupport), which the gateway passes through
// rather than runs. The gateway records each id under the owner whose call
// created it, with the upstream session it lives on, so that a tasks/get,
// tasks/result or tasks/cancel of that id on any replica goes to the
// upstream on that session, and another owner's never does; and it indexes
// the id beside the owner's own tasks, so that one tasks/list shows both.
//
//	<prefix>:{<owner>}:ut:<id>   STRING: the record (JSON, UpstreamTask);
//	                             PEXPIRE the task's ttl
//	<prefix>:{<owner>}:created   ZSET (the owner's task index): member
//	                             "u:" + base64url(id), scored by when the
//	                             gateway recorded it (unix ms); 2025-11-25
//	                             tasks only (the extension has no tasks/list)
//	<prefix>:uta:<sha(id)>       STRING "1", same expiry: the id is some owner's
//	                             (requests the gateway would otherwise relay
//	                             without an owner check are refused for it)

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultUpstreamTaskTTL is how long an upstream task's record lives when
// the upstream named no ttl.
const DefaultUpstreamTaskTTL = 24 * time.Hour

func (k keys) upstreamTask(owner, id string) string { return k.ownerBase(owner) + ":ut:" + id }

func (k keys) anyUpstreamTask(id string) string { return k.prefix + ":uta:" + ownerTag(id) }

// maxUpstreamTaskID bounds an upstream task id the store keeps.
const maxUpstreamTaskID = 256

// maxUpstreamTaskRecord bounds the upstream's task object the store keeps
// (a task object is a few hundred bytes; a larger one is not kept, only
// routed).
const maxUpstreamTaskRecord = 8 << 10

// UpstreamTask is the record of an upstream's own task.
type UpstreamTask struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// Session is the upstream session the task lives on ("" for a
	// stateless upstream, or a record from before sessions were kept:
	// then the caller's own session is used).
	Session string `json:"session,omitempty"`
	// Protocol is the task protocol the upstream speaks for it.
	Protocol Protocol `json:"protocol,omitempty"`
	Tool     string   `json:"tool,omitempty"`
	// Recorded is when the gateway recorded it (the index's order).
	Recorded time.Time `json:"recorded"`
	// Task is the upstream's task object as its CreateTaskResult gave it
	// (taskId, status, createdAt, ttl, pollInterval): the last state the
	// gateway knows without asking the upstream.
	Task json.RawMessage `json:"task,omitempty"`
	// Lost, when set, says why the upstream no longer has the task (its
	// session ended, it restarted): the task is failed, for good.
	Lost string `json:"lost,omitempty"`
}

// upstreamMember is the index member of upstream task id: no "." (the
// list cursor's separator) whatever the id holds.
func upstreamMember(id string) string {
	return "u:" + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// upstreamMemberID is the id of an index member upstreamMember made.
func upstreamMemberID(m string) (string, bool) {
	rest, ok := strings.CutPrefix(m, "u:")
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) == 0 || len(b) > maxUpstreamTaskID {
		return "", false
	}
	return string(b), true
}

// PutUpstreamTask records u (ID, Owner and Session set; Recorded is set
// here) for ttl (zero or negative: DefaultUpstreamTaskTTL; at most
// MaxTTL), and indexes it in its owner's task list. One round trip.
func (s *Store) PutUpstreamTask(ctx context.Context, u UpstreamTask, ttl time.Duration) error {
	if u.ID == "" || len(u.ID) > maxUpstreamTaskID {
		return fmt.Errorf("taskstore: upstream task id of %d bytes", len(u.ID))
	}
	ttl = s.UpstreamTaskTTL(ttl)
	if len(u.Task) > maxUpstreamTaskRecord {
		u.Task = nil
	}
	now := s.opt.Clock()
	u.Recorded = now.Truncate(time.Millisecond)
	rec, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("taskstore: put upstream task %s: %w", u.ID, err)
	}
	pipe := s.rdb.Pipeline()
	cmds := []redis.Cmder{
		pipe.Set(ctx, s.k.upstreamTask(u.Owner, u.ID), rec, ttl),
		pipe.Set(ctx, s.k.anyUpstreamTask(u.ID), "1", ttl),
	}
	if u.Protocol != Protocol2026 { // the extension has no tasks/list: nothing to index
		// As createCmd keeps the index: entries older than MaxTTL
		// trimmed, the key kept MaxTTL past its newest entry.
		maxttl := s.opt.MaxTTL.Milliseconds()
		index := s.k.created(u.Owner)
		cmds = append(cmds,
			pipe.ZRemRangeByScore(ctx, index, "-inf", strconv.FormatInt(now.UnixMilli()-maxttl, 10)),
			pipe.ZAdd(ctx, index, redis.Z{Score: float64(now.UnixMilli()), Member: upstreamMember(u.ID)}),
			pipe.PExpire(ctx, index, s.opt.MaxTTL))
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return fmt.Errorf("taskstore: put upstream task %s: %w", u.ID, classify(ctx, err))
		}
	}
	return nil
}

// UpstreamTaskTTL is how long PutUpstreamTask keeps a record asked to
// live ttl: DefaultUpstreamTaskTTL for none, at most MaxTTL.
func (s *Store) UpstreamTaskTTL(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = DefaultUpstreamTaskTTL
	}
	return min(ttl, s.opt.MaxTTL)
}

// UpstreamTaskOwner returns owner's record of upstream task id (nil when
// owner's calls created no such task), and reports whether any owner's
// did (anyone).
func (s *Store) UpstreamTaskOwner(ctx context.Context, owner, id string) (mine *UpstreamTask, anyone bool, err error) {
	if id == "" || len(id) > maxUpstreamTaskID {
		return nil, false, nil
	}
	pipe := s.rdb.Pipeline()
	m := pipe.Get(ctx, s.k.upstreamTask(owner, id))
	a := pipe.Exists(ctx, s.k.anyUpstreamTask(id))
	_, _ = pipe.Exec(ctx)
	if err := m.Err(); err != nil && err != redis.Nil {
		return nil, false, fmt.Errorf("taskstore: upstream task %s: %w", id, classify(ctx, err))
	}
	if err := a.Err(); err != nil {
		return nil, false, fmt.Errorf("taskstore: upstream task %s: %w", id, classify(ctx, err))
	}
	if m.Err() == nil {
		mine = decodeUpstreamTask(m.Val(), owner, id)
	}
	return mine, a.Val() == 1, nil
}

// decodeUpstreamTask reads a record; one the store cannot read (a record
// of an older version held just "1") still says the task is owner's.
func decodeUpstreamTask(v, owner, id string) *UpstreamTask {
	var u UpstreamTask
	if json.Unmarshal([]byte(v), &u) != nil || u.ID != id || u.Owner != owner {
		return &UpstreamTask{ID: id, Owner: owner}
	}
	return &u
}

// MarkUpstreamTaskLost records that the upstream no longer has owner's
// task id, and why; the record keeps its expiry. A record that is gone is
// left gone.
func (s *Store) MarkUpstreamTaskLost(ctx context.Context, owner, id, why string) error {
	key := s.k.upstreamTask(owner, id)
	v, err := s.rdb.Get(ctx, key).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("taskstore: mark upstream task %s lost: %w", id, classify(ctx, err))
	}
	u := decodeUpstreamTask(v, owner, id)
	u.Lost = why
	rec, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("taskstore: mark upstream task %s lost: %w", id, err)
	}
	if err := s.rdb.SetArgs(ctx, key, rec, redis.SetArgs{KeepTTL: true, Mode: "XX"}).Err(); err != nil && err != redis.Nil {
		return fmt.Errorf("taskstore: mark upstream task %s lost: %w", id, classify(ctx, err))
	}
	return nil
}
