package taskstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// Session messages. A legacy (2025-11-25) client hears about its tasks on
// its session's GET stream too: notifications/tasks/status on every status
// change, and progress while no tasks/result stream is open. Whichever
// replica holds that GET stream watches the session's channel; whichever
// replica changes a task publishes there. Like every pub/sub message these
// are best effort, which is all MCP 2025-11-25, Tasks (utilities/tasks)
// asks of them ("Requestors MUST NOT rely on receiving this notification").
//
//	<prefix>:s:{<sha256(session) 32 hex>}:ev   pub/sub channel of one session

func (k keys) sessionChannel(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return k.prefix + ":s:{" + hex.EncodeToString(sum[:16]) + "}:ev"
}

// PublishSession sends msg (a JSON-RPC message) to whoever watches the
// session. It does not fail when nobody does.
func (s *Store) PublishSession(ctx context.Context, sessionID string, msg []byte) error {
	err := s.rdb.Publish(ctx, s.k.sessionChannel(sessionID), string(EventMessage)+":"+string(msg)).Err()
	if err != nil {
		return fmt.Errorf("taskstore: publish to session: %w", classify(ctx, err))
	}
	return nil
}

// WatchSession subscribes to the session's messages: each arrives as an
// EventMessage with the message in Data. EventResync means some may have
// been lost while the connection was down.
func (s *Store) WatchSession(ctx context.Context, sessionID string) (*Watch, error) {
	w, err := s.hub.add(ctx, s.k.sessionChannel(sessionID), sessionWatchBuffer)
	if err != nil {
		return nil, fmt.Errorf("taskstore: watch session: %w", err)
	}
	return w, nil
}

// A tasks/result stream that is open for a task marks it, so the worker
// (maybe on another replica) relays progress there and not also on the
// session's GET stream (MCP 2025-11-25, Tasks (utilities/tasks) allows
// either; doubling would make a client count progress twice). The mark
// expires by itself, so a replica that dies with a stream open blocks
// nothing for long.
//
//	<prefix>:{<owner>}:t:<id>:rs   STRING "1" with PX ttl

func (k keys) resultStream(owner, id string) string { return k.task(owner, id) + ":rs" }

// MarkResultStream records that a tasks/result stream is open for the task,
// for ttl; call it again before ttl passes to keep the mark.
func (s *Store) MarkResultStream(ctx context.Context, owner, id string, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, s.k.resultStream(owner, id), "1", ttl).Err(); err != nil {
		return fmt.Errorf("taskstore: mark result stream %s: %w", id, classify(ctx, err))
	}
	return nil
}

// ClearResultStream removes the mark.
func (s *Store) ClearResultStream(ctx context.Context, owner, id string) error {
	if err := s.rdb.Del(ctx, s.k.resultStream(owner, id)).Err(); err != nil {
		return fmt.Errorf("taskstore: clear result stream %s: %w", id, classify(ctx, err))
	}
	return nil
}

// ResultStreamOpen reports whether a tasks/result stream is marked open.
func (s *Store) ResultStreamOpen(ctx context.Context, owner, id string) (bool, error) {
	n, err := s.rdb.Exists(ctx, s.k.resultStream(owner, id)).Result()
	if err != nil {
		return false, fmt.Errorf("taskstore: result stream %s: %w", id, classify(ctx, err))
	}
	return n == 1, nil
}

// PublishTask sends msg (a JSON-RPC notification about the task, such as
// progress) to the task's watchers as an EventMessage, in order after the
// task's earlier events. Best effort, like all pub/sub.
func (s *Store) PublishTask(ctx context.Context, owner, id string, msg []byte) error {
	err := s.rdb.Publish(ctx, s.k.channel(owner, id), string(EventMessage)+":"+string(msg)).Err()
	if err != nil {
		return fmt.Errorf("taskstore: publish to task %s: %w", id, classify(ctx, err))
	}
	return nil
}
