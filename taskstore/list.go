package taskstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Listed is one entry of an owner's task list: a task of the gateway's
// own (Task), or an upstream's own task the owner's call created
// (Upstream; its current state is the upstream's to tell).
type Listed struct {
	Task     *Task
	Upstream *UpstreamTask
}

// List returns a page of the owner's tasks, the gateway's and the
// upstream tasks recorded for it (PutUpstreamTask) in one order, newest
// first, and the cursor of the next page ("" on the last page). cursor "" starts at the newest task.
// limit <= 0 means DefaultPageSize; it is capped at MaxPageSize.
//
// The order is (createdAt, id) descending and a cursor names the last task of
// its page, so a cursor stays valid and pages neither repeat nor skip tasks
// when tasks are created meanwhile (they sort before the cursor), or when
// tasks expire (they are left out). A cursor this store did not produce:
// ErrBadCursor. Two round trips: the owner's index, then the tasks.
func (s *Store) List(ctx context.Context, owner, cursor string, limit int) ([]Listed, string, error) {
	out, next, err := s.list(ctx, owner, cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("taskstore: list: %w", err)
	}
	return out, next, nil
}

func (s *Store) list(ctx context.Context, owner, cursor string, limit int) ([]Listed, string, error) {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	limit = min(limit, MaxPageSize)
	after := listCursor{}
	if cursor != "" {
		c, err := decodeCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		after = c
	}
	ids, err := s.pageIDs(ctx, owner, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	more := len(ids) > limit
	if more {
		ids = ids[:limit]
	}

	pipe := s.rdb.Pipeline()
	tasks := make([]*redis.MapStringStringCmd, len(ids))
	ups := make([]*redis.StringCmd, len(ids))
	for i, e := range ids {
		if up, ok := upstreamMemberID(e.ID); ok {
			ups[i] = pipe.Get(ctx, s.k.upstreamTask(owner, up))
		} else {
			tasks[i] = pipe.HGetAll(ctx, s.k.task(owner, e.ID))
		}
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return nil, "", classify(ctx, err)
		}
	}
	now := s.opt.Clock()
	out := make([]Listed, 0, len(ids))
	for i, e := range ids {
		if c := ups[i]; c != nil {
			if c.Err() == nil { // else expired since it was indexed
				id, _ := upstreamMemberID(e.ID)
				out = append(out, Listed{Upstream: decodeUpstreamTask(c.Val(), owner, id)})
			}
			continue
		}
		t, ok := decodeTask(tasks[i].Val())
		if !ok || t.Owner != owner || !t.ExpiresAt().After(now) {
			continue // expired since it was indexed
		}
		out = append(out, Listed{Task: t})
	}
	next := ""
	if more {
		next = ids[len(ids)-1].encode()
	}
	return out, next, nil
}

// pageIDs reads up to n index entries strictly after the cursor in
// (created, id) descending order. ZREVRANGEBYSCORE orders ties of score by
// member descending too, so entries of the cursor's own millisecond that are
// not after it form a prefix to skip.
func (s *Store) pageIDs(ctx context.Context, owner string, after listCursor, n int) ([]listCursor, error) {
	max := "+inf"
	if after.ID != "" {
		max = strconv.FormatInt(after.CreatedMS, 10)
	}
	out := make([]listCursor, 0, n)
	batch := int64(n + 8)
	for offset := int64(0); ; offset += batch {
		zs, err := s.rdb.ZRevRangeByScoreWithScores(ctx, s.k.created(owner), &redis.ZRangeBy{
			Min: "-inf", Max: max, Offset: offset, Count: batch,
		}).Result()
		if err != nil {
			return nil, classify(ctx, err)
		}
		for _, z := range zs {
			e := listCursor{CreatedMS: int64(z.Score), ID: z.Member.(string)}
			if after.ID != "" && e.CreatedMS == after.CreatedMS && e.ID >= after.ID {
				continue
			}
			out = append(out, e)
			if len(out) == n {
				return out, nil
			}
		}
		if int64(len(zs)) < batch {
			return out, nil
		}
	}
}

// listCursor is a position in an owner's list: the last task of a page.
// On the wire it is base64url("v1.<createdMS>.<id>"): opaque to clients,
// and not a secret (it only works for its owner's own list).
type listCursor struct {
	CreatedMS int64
	ID        string
}

func (c listCursor) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1." + strconv.FormatInt(c.CreatedMS, 10) + "." + c.ID))
}

func decodeCursor(s string) (listCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return listCursor{}, ErrBadCursor
	}
	parts := strings.Split(string(b), ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return listCursor{}, ErrBadCursor
	}
	if _, up := upstreamMemberID(parts[2]); !up && !validID(parts[2]) {
		return listCursor{}, ErrBadCursor
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || ms < 0 || strconv.FormatInt(ms, 10) != parts[1] {
		return listCursor{}, ErrBadCursor
	}
	return listCursor{CreatedMS: ms, ID: parts[2]}, nil
}
