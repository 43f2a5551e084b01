package taskstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// keys builds every Redis key and channel name the store uses; no other code
// (and no Lua script) builds one. The hash tag is the owner's digest, so a
// task's keys and its owner's indexes share one Cluster slot and every script
// touches a single slot (see doc.go, "Cluster").
type keys struct {
	prefix string
}

// ownerTag is the hash-tag content for an owner: 32 hex digits of
// SHA-256(owner). Hashing keeps arbitrary owner strings (which may contain
// '{' or '}') out of key names and gives every owner the same key length.
func ownerTag(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:16])
}

// ownerBase is "<prefix>:{<ownerTag>}".
func (k keys) ownerBase(owner string) string {
	var b strings.Builder
	b.Grow(len(k.prefix) + 35)
	b.WriteString(k.prefix)
	b.WriteString(":{")
	b.WriteString(ownerTag(owner))
	b.WriteString("}")
	return b.String()
}

// task is the task hash: <prefix>:{<owner>}:t:<id>.
func (k keys) task(owner, id string) string { return k.ownerBase(owner) + ":t:" + id }

// gone is the tombstone left after a task expires, so Get can say ErrExpired
// rather than ErrNotFound: <prefix>:{<owner>}:t:<id>:gone.
func (k keys) gone(owner, id string) string { return k.task(owner, id) + ":gone" }

// channel is the task's pub/sub channel: <prefix>:{<owner>}:t:<id>:ev.
func (k keys) channel(owner, id string) string { return k.task(owner, id) + ":ev" }

// removals is the store-wide pub/sub channel on which every script that
// removes a task record announces it (removals.go): <prefix>:removed.
func (k keys) removals() string { return k.prefix + ":removed" }

// created is the owner's ZSET of task ids scored by creation time (unix ms),
// for List: <prefix>:{<owner>}:created.
func (k keys) created(owner string) string { return k.ownerBase(owner) + ":created" }

// active is the owner's ZSET of non-terminal task ids scored by expiry time
// (unix ms), for the MaxTasksPerOwner cap; expired ids are reaped by score:
// <prefix>:{<owner>}:active.
func (k keys) active(owner string) string { return k.ownerBase(owner) + ":active" }

// leases is the global ZSET of leased tasks scored by a lower bound of their
// lease deadline (unix ms), members "<id>|<owner>": <prefix>:leases. It is in
// its own slot and is only a hint; the task hash is the truth (see lease.go).
func (k keys) leases() string { return k.prefix + ":leases" }

// ops returns the keys of the operator's index (ops.go), in the order the
// scripts expect them after their own keys: live, exp, ids, then one ZSET
// per status group (run, completed, failed, cancelled). They share the
// hash tag {ops}: one slot, so a script on a single node can write them
// with the task; on Cluster no script can (the task is in its owner's
// slot), and the Store keeps no index there.
//
//	<prefix>:{ops}:live      ZSET "<id>|<ownerTag>" -> created ms (every live task)
//	<prefix>:{ops}:exp       ZSET "<id>|<ownerTag>" -> expiry ms  (trimming)
//	<prefix>:{ops}:ids       HASH id -> ownerTag                 (search by id)
//	<prefix>:{ops}:run       ZSET non-terminal members -> created ms
//	<prefix>:{ops}:completed, :failed, :cancelled   ZSET terminal members -> created ms
//	<prefix>:{ops}:expired   LIST "<expiry ms>|<member>|<ownerTag>|<tool>" of tasks
//	                         whose ttl elapsed before they ended, newest first, 200 at most
func (k keys) ops() []string {
	b := k.prefix + ":{ops}:"
	return []string{b + "live", b + "exp", b + "ids", b + "run", b + "completed", b + "failed", b + "cancelled", b + "expired"}
}

// timeline is a task's timeline (timeline.go), in its owner's slot:
// <prefix>:{<owner>}:t:<id>:log.
func (k keys) timeline(owner, id string) string { return k.task(owner, id) + ":log" }

// taskByTag is the task hash of the owner whose tag (ownerTag) is tag.
func (k keys) taskByTag(tag, id string) string { return k.prefix + ":{" + tag + "}:t:" + id }

// opsMember is a task's member in the operator's index: the id (fixed
// length) and the owner's tag, never the owner itself (it may be a
// session id).
func opsMember(owner, id string) string { return id + "|" + ownerTag(owner) }

func splitOpsMember(m string) (id, tag string, ok bool) {
	if len(m) != 36+1+32 || m[36] != '|' {
		return "", "", false
	}
	return m[:36], m[37:], true
}

// taskKeys returns the keys of a task's own state, in the order the
// transition scripts expect: KEYS[1] task, KEYS[2] active, KEYS[3] the
// owner's webhook outbox.
func (k keys) taskKeys(owner, id string) []string {
	base := k.ownerBase(owner)
	return []string{base + ":t:" + id, base + ":active", base + ":wh"}
}

// createKeys returns createCmd's fixed keys (abandonCmd's too): task,
// tombstone, created, active, outbox.
func (k keys) createKeys(owner, id string) []string {
	return []string{k.task(owner, id), k.gone(owner, id), k.created(owner), k.active(owner), k.outbox(owner)}
}

// leaseMember is the member of the leases ZSET for one task. The id has a
// fixed length, so the owner (arbitrary text) goes last.
func leaseMember(owner, id string) string { return id + "|" + owner }

func splitLeaseMember(m string) (owner, id string, ok bool) {
	if len(m) < 37 || m[36] != '|' {
		return "", "", false
	}
	return m[37:], m[:36], true
}

// replica is a replica's heartbeat record (replicas.go):
// <prefix>:replica:<id>.
func (k keys) replica(id string) string { return k.prefix + ":replica:" + id }

// replicas is the ZSET of the replicas' last heartbeats (replicas.go):
// <prefix>:replicas.
func (k keys) replicas() string { return k.prefix + ":replicas" }

// console says a replica of the fleet serves the console (timeline.go,
// AnnounceConsole): <prefix>:console.
func (k keys) console() string { return k.prefix + ":console" }

// outbox is the owner's webhook outbox (webhook_outbox.go): a STREAM of
// the events of the owner's tasks, in their slot, so the script that
// changes a task appends its event atomically: <prefix>:{<owner>}:wh.
func (k keys) outbox(owner string) string { return k.ownerBase(owner) + ":wh" }

// outboxes is the hint SET of owner outboxes that may hold events:
// <prefix>:whq. Like the leases index, it is in its own slot, written
// right after the scripts (not atomically), and only a hint; the sweep
// (SweepWebhookOutboxes) re-adds what it lost.
func (k keys) outboxes() string { return k.prefix + ":whq" }

// outboxPattern matches every owner outbox, for the sweep's SCAN.
func (k keys) outboxPattern() string { return k.prefix + ":{*}:wh" }

// isOutbox reports whether key is an owner outbox of this prefix.
func (k keys) isOutbox(key string) bool {
	p := k.prefix + ":{"
	return len(key) == len(p)+32+4 && strings.HasPrefix(key, p) && strings.HasSuffix(key, "}:wh")
}

// webhookNotify is the pub/sub channel on which the scripts announce that
// an outbox got an event: <prefix>:wh:notify.
func (k keys) webhookNotify() string { return k.prefix + ":wh:notify" }

// whBase is the base of one webhook endpoint's delivery keys
// (webhook_queue.go): <prefix>:{wh:<endpoint>}, all in one slot.
func (k keys) whBase(endpoint string) string { return k.prefix + ":{wh:" + endpoint + "}" }

// whDelivery is one delivery's HASH: <prefix>:{wh:<endpoint>}:d:<event id>.
func (k keys) whDelivery(endpoint, eventID string) string {
	return k.whBase(endpoint) + ":d:" + eventID
}

// whMarker says a delivery of the event to the endpoint was enqueued once
// (EnqueueDelivery is idempotent): <prefix>:{wh:<endpoint>}:m:<event id>.
func (k keys) whMarker(endpoint, eventID string) string {
	return k.whBase(endpoint) + ":m:" + eventID
}

// whTask is the LIST of one task's pending delivery ids for the endpoint,
// in event order: <prefix>:{wh:<endpoint>}:q:<task id>.
func (k keys) whTask(endpoint, taskID string) string { return k.whBase(endpoint) + ":q:" + taskID }

// whDue is the endpoint's ZSET of deliveries to make, event id -> due ms;
// only the head of each task's list is in it: <prefix>:{wh:<endpoint>}:due.
func (k keys) whDue(endpoint string) string { return k.whBase(endpoint) + ":due" }

// whDead is the endpoint's dead letters, event id -> dead ms:
// <prefix>:{wh:<endpoint>}:dead.
func (k keys) whDead(endpoint string) string { return k.whBase(endpoint) + ":dead" }
