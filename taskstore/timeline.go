package taskstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A task's timeline, for the operator's console: what happened to it, in
// order. The scripts that change a task append to it in the same atomic
// step (scripts.go, luaTimeline), so it never disagrees with the task:
//
//	created      the task was created (working)
//	status       a status change, with its statusMessage
//	input        an input request was issued: its method and key (never its params)
//	answered     an input request's key was answered (never the answer)
//	progress     the latest progress (a later one replaces it in place)
//	cancel       cancelled, by "client" (tasks/cancel) or "operator" (the console)
//
// The list sits next to the task hash in its owner's slot, expires with
// the task and keeps the newest 100 entries; each entry's text is cut to
// 300 bytes. On Redis Cluster the store keeps none: without the index the
// console cannot find a task to show it.

// TimelineEntry is one entry of a task's timeline.
type TimelineEntry struct {
	At   time.Time
	Kind string // created, status, input, answered, progress, cancel
	// Word is the status (created, status), the method (input), or who
	// cancelled (cancel): "client" or "operator".
	Word string
	// Text is the statusMessage (status, cancel), the request's key
	// (input, answered) or the progress params (progress).
	Text string
}

// AnnounceConsole records, for keep, that a replica of the fleet serves
// the console: replicas with --console-records auto keep the records
// while one does (ConsoleAnnounced). <prefix>:console.
func (s *Store) AnnounceConsole(ctx context.Context, keep time.Duration) error {
	if err := s.rdb.Set(ctx, s.k.console(), "1", keep).Err(); err != nil {
		return fmt.Errorf("taskstore: announce console: %w", classify(ctx, err))
	}
	return nil
}

// ConsoleAnnounced reports whether a replica announced a console within
// its keep.
func (s *Store) ConsoleAnnounced(ctx context.Context) (bool, error) {
	n, err := s.rdb.Exists(ctx, s.k.console()).Result()
	if err != nil {
		return false, fmt.Errorf("taskstore: console announced: %w", classify(ctx, err))
	}
	return n == 1, nil
}

// OpsTimeline returns t's timeline, oldest first, and its attempts count
// (the attempts field of the task hash, 1 without it). One round trip.
func (s *Store) OpsTimeline(ctx context.Context, t *Task) ([]TimelineEntry, int, error) {
	pipe := s.rdb.Pipeline()
	lr := pipe.LRange(ctx, s.k.timeline(t.Owner, t.ID), 0, -1)
	at := pipe.HGet(ctx, s.k.task(t.Owner, t.ID), fAttempts)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, fmt.Errorf("taskstore: timeline %s: %w", t.ID, classify(ctx, err))
	}
	attempts, _ := strconv.Atoi(at.Val())
	out := make([]TimelineEntry, 0, len(lr.Val()))
	for _, e := range lr.Val() {
		if te, ok := parseTimelineEntry(e); ok {
			out = append(out, te)
		}
	}
	return out, max(attempts, 1), nil
}

func parseTimelineEntry(e string) (TimelineEntry, bool) {
	p := strings.SplitN(e, "|", 4)
	if len(p) != 4 {
		return TimelineEntry{}, false
	}
	ms, err := strconv.ParseInt(p[0], 10, 64)
	if err != nil {
		return TimelineEntry{}, false
	}
	return TimelineEntry{At: fromMS(ms), Kind: p[1], Word: p[2], Text: p[3]}, true
}

// OpsCancel cancels a task as the operator (the console): as
// RequestCancel, recorded in its timeline as cancelled by the operator.
func (s *Store) OpsCancel(ctx context.Context, owner, id, message string) (*Task, error) {
	t, err := s.requestCancel(ctx, owner, id, message, "operator")
	if err != nil {
		return nil, fmt.Errorf("taskstore: cancel %s: %w", id, err)
	}
	return t, nil
}

// ExpiredTask is a task whose ttl elapsed before it ended, as the
// operator's index remembers it once the task is gone.
type ExpiredTask struct {
	ID, Tool  string
	ExpiredAt time.Time
}

// OpsExpired returns up to n of the tasks whose ttl elapsed while they
// were working or input_required, newest first. The index records one
// when it drops the task's entry (the next create after its expiry), and
// keeps the last 200.
func (s *Store) OpsExpired(ctx context.Context, n int) ([]ExpiredTask, error) {
	if s.cluster {
		return nil, ErrOpsDisabled
	}
	vals, err := s.rdb.LRange(ctx, s.k.ops()[7], 0, int64(max(n, 1)-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("taskstore: ops expired: %w", classify(ctx, err))
	}
	out := make([]ExpiredTask, 0, len(vals))
	for _, v := range vals {
		// "<expiry ms>|<id>|<ownerTag>|<ownerTag>|<tool>"
		p := strings.SplitN(v, "|", 5)
		if len(p) < 3 {
			continue
		}
		ms, err := strconv.ParseInt(p[0], 10, 64)
		if err != nil {
			continue
		}
		e := ExpiredTask{ID: p[1], ExpiredAt: fromMS(ms)}
		if len(p) == 5 {
			e.Tool = p[4]
		}
		out = append(out, e)
	}
	return out, nil
}
