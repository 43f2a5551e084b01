// Package taskstore keeps taskgate's tasks in Redis, so any gateway replica
// can answer any request about any task. With a Redis server, a gateway
// restart loses no task record (a task whose upstream call ran on the
// stopped replica is failed with a message saying so, not dropped), and a
// Redis restart keeps what its persistence (AOF or RDB) saved. The default
// embedded store (in-process miniredis, embedded.go) keeps state in memory
// only and loses it when the process exits. It is the only package of the
// gateway that sends commands to Redis.
//
// # Model
//
// A task (Task) is one Redis hash: identity and owner, tool, flavour, the
// status of the state machine of MCP 2025-11-25, Tasks (utilities/tasks),
// section "Task Status Lifecycle" (working <-> input_required -> completed |
// failed | cancelled, terminal states sticky), timestamps, ttl and
// pollInterval, the outcome (JSON-RPC result and/or error), outstanding
// input requests and the responses received for them, latest progress, the
// cancel flag, the worker lease, and the upstream request id and session
// the task's call runs on (Upstream: the session is where legacy status
// notifications go).
//
// Every change is one Lua script (scripts.go), atomic, one round trip: it
// checks owner, expiry and state, writes, and publishes an event on the
// task's channel. "Now" comes from Options.Clock, never from the script.
// Scripts return small integer codes that codeErr turns into the Err*
// sentinels. Get is a single HGETALL.
//
// A write can land without its caller hearing so: Redis runs the script and
// dies (or the connection breaks) before the reply arrives, and the caller
// sees ErrUnavailable. The writes the gateway retries until Redis answers
// (AddInputRequests, and Finish, FinishAndRelease, Complete and Fail
// through Outcome.WriteID) carry a write id, stored with what they wrote; a retry
// that finds its own id reports success and changes nothing, where it would
// otherwise meet "key already used" or "already terminal".
// TakeInputResponses, which removes what it returns, takes a take id for
// the same reason: a repeated take gets back what a lost one removed.
// Create has its own answer to a lost reply: the abandoned task is removed
// (abandon.go).
//
// # Keys
//
// All keys start with Options.Prefix (default "tg") and carry the owner's
// hash tag, {o} = first 32 hex digits of SHA-256(owner):
//
//	tg:{o}:t:<id>        HASH  the task (fields: task.go)
//	tg:{o}:t:<id>:gone   STR   tombstone: exists until ttl + ExpiredWindow
//	tg:{o}:created       ZSET  id -> createdAt ms                 (List)
//	tg:{o}:active        ZSET  non-terminal id -> expiry ms       (MaxTasksPerOwner)
//	tg:leases            ZSET  "<id>|<owner>" -> lease deadline ms (recovery hint)
//	tg:{o}:t:<id>:ev     pub/sub channel of the task     (events.go)
//
// The task hash and tombstone get PEXPIRE ttl at creation ("after a task's
// ttl lifetime has elapsed, receivers MAY delete the task"); nothing renews
// it. The owner's index keys live MaxTTL past the owner's last Create. Expiry is
// also checked against Options.Clock in every script and in Get, so every
// backend agrees even before Redis deletes the key. A missing task with a
// tombstone is ErrExpired, without one ErrNotFound. A tombstone costs about
// 100 bytes for ExpiredWindow (default 1h) past its task.
//
// # Cluster
//
// The hash tag is the owner, not the task id. So a task's keys and its
// owner's indexes share one slot, and Create (cap check + record + indexes),
// the terminal transitions (which free a cap slot) and List's index read
// are each atomic and single-slot, with no cross-slot bookkeeping that a
// crash could leave half done. Owner isolation also falls out of the key
// layout: another owner's Get builds another key. Every method takes the
// owner, which the gateway always has (docs/ARCHITECTURE.md invariant 3).
//
// The cost: all of one owner's tasks live on one shard. That is bounded by
// MaxTasksPerOwner live tasks per owner, but a deployment whose traffic is
// one single credential gets no spread from Cluster.
//
// The exception is the global leases index, which recovery scans across
// owners: it sits in its own slot, is written in the same pipeline as the
// lease scripts (not atomically), and is only a hint that ListExpiredLeases
// checks against the task hashes (lease.go). Classic PUBLISH, used inside
// the scripts, reaches every Cluster node, so the one pub/sub connection of
// a Store may sit on any node.
//
// A master's death is followed at once: a command that fails as a dead or
// demoted node makes it fail asks go-redis to reload the slot map, at most
// once per 250 ms (failover.go), instead of waiting for go-redis' 60 s
// reload. Keyspace says how many of the 16384 slots this replica reaches,
// and whether the cluster itself reports the others down (keyspace.go).
//
// # Webhooks
//
// With Options.Webhooks, every script that changes a task's status
// (create, input requests, the terminal transitions, a rerun) also
// appends the event to its owner's outbox in the same atomic step
// (webhook_outbox.go); the webhook package's dispatcher reads the
// outboxes through one consumer group, turns each event into one
// delivery per endpoint, queued a batch of events per endpoint in one
// script (webhook_enqueue.go), and works through per-endpoint queues
// (webhook_queue.go), one task's events in order:
//
//	tg:{o}:wh                STREAM the owner's events, "evt_<id>_<n>" (field whseq of the task counts)
//	tg:whq                   SET    hint: outboxes that may hold events (swept once a minute)
//	tg:wh:notify             pub/sub channel: an outbox got an event
//	tg:{wh:<ep>}:m:<event>   STR    enqueued once, for the retry window and a day
//	tg:{wh:<ep>}:d:<event>   HASH   a delivery: payload, attempts, times, last error
//	tg:{wh:<ep>}:q:<task>    LIST   the task's pending event ids, in order
//	tg:{wh:<ep>}:due         ZSET   the lists' heads -> due ms (claimed: lease end)
//	tg:{wh:<ep>}:dead        ZSET   dead letters -> dead ms (newest 1,000, 30 days)
//
// Both stages are Cluster-safe: an outbox is in its owner's slot, an
// endpoint's keys in theirs; only the hint SET is written outside a
// script, like the leases index.
//
// # Trends
//
// The console's trends (trends.go) are per-minute and per-hour hashes of
// counts per tool, all under the hash tag {trends} (one slot), written by
// one script per flush that records its flush id first, so a retried
// flush adds nothing twice; they expire after 2 h and 25 h.
//
// # Redis URL
//
// ParseURL and Dial take the --redis-url forms:
//
//	redis://[user:pass@]host[:port][/db][?opt=…]                 standalone
//	rediss://…                                                     standalone over TLS
//	redis+cluster://[user:pass@]h1:port[,h2:port…][?opt=…]        Cluster (seed nodes)
//	rediss+cluster://…                                             Cluster over TLS
//	redis+sentinel://[user:pass@]s1:26379[,s2:26379…]/master[/db][?opt=…]
//	rediss+sentinel://…                                            Sentinel over TLS
//
// user:pass are for the Redis servers; sentinels' own credentials go in the
// sentinel_username and sentinel_password options. Other options are
// go-redis' (dial_timeout=1s, read_timeout, write_timeout, pool_size,
// max_retries, protocol, client_name, skip_verify, …). Unless the URL says
// otherwise, timeouts are short (dial 1s, read/write 2s) and a command is
// retried once, so calls fail fast with ErrUnavailable when Redis is down.
//
// Reads go to the primary (no replica reads), so a task is visible to every
// gateway replica as soon as Create returns.
//
// # Embedded
//
// Without --redis-url, OpenEmbedded runs miniredis in process, with a clock
// that follows real time so ttls expire, and the same Store on it. Its
// state is in memory: lost on exit and not shared between processes, so it
// serves one replica.
//
// # Signals
//
// Every script publishes "<kind>:<status>" on the task's channel. Waiters
// never depend on a message: see events.go and Store.WaitFor.
package taskstore
