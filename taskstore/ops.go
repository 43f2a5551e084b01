package taskstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The operator's index: every live task across owners, for the console.
// The scripts that create and end a task keep it in the same atomic step
// (scripts.go), so Create stays one round trip. Its keys (keys.ops) share
// the hash tag {ops}; on a single node (standalone, Sentinel, embedded)
// that is no matter, and on Redis Cluster a script cannot touch them
// together with a task's keys (another slot), so the Store keeps no index
// there and OpsEnabled says so. Members are "<id>|<ownerTag>": the owner
// itself (it may be a session id) is never in the index.
//
// Bounded: a member is dropped once its task's ttl has elapsed (by the
// next Create, up to 100 at a time) or its create is abandoned.
// Working and input_required tasks share the run set; the page filter
// tells them apart from the task hash.

var (
	// ErrOpsDisabled is returned by the operator's listing on Redis Cluster.
	ErrOpsDisabled = errors.New("taskstore: the operator's index is not kept on Redis Cluster")
	// ErrBadFilter is a listing filter that names no status.
	ErrBadFilter = errors.New("taskstore: bad filter")
)

// OpsEnabled reports whether the store can have an operator's index to
// read: not on Redis Cluster. Whether this store's scripts write it now
// is RecordsEnabled.
func (s *Store) OpsEnabled() bool { return !s.cluster }

// Cluster reports whether the store is on a Redis Cluster (Keyspace then
// counts slots).
func (s *Store) Cluster() bool { return s.cluster }

// RecordsEnabled reports whether the scripts keep the operator's index
// and the tasks' timelines now.
func (s *Store) RecordsEnabled() bool { return !s.cluster && s.records.Load() }

// SetOpsRecords turns the operator's index and the tasks' timelines on or
// off for the scripts this store runs from now on (never on Cluster). A
// task created while they were off is not in the index; its timeline
// starts at the first change after they were turned on.
func (s *Store) SetOpsRecords(on bool) { s.records.Store(on) }

// withRecords appends to a script's keys the task's timeline and, with
// index, the operator's index keys, when the store keeps them: the
// scripts find the index keys after the timeline's, so both are decided
// by one read of the setting.
func (s *Store) withRecords(ks []string, owner, id string, index bool) []string {
	if !s.RecordsEnabled() {
		return ks
	}
	ks = append(ks, s.k.timeline(owner, id))
	if index {
		ks = append(ks, s.k.ops()...)
	}
	return ks
}

// OpsQuery selects a page of the operator's listing.
type OpsQuery struct {
	// Status filters by status; "" for every status.
	Status Status
	// Tool filters by exact tool name; "" for every tool.
	Tool string
	// Cursor is the Next of the previous page; "" for the newest.
	Cursor string
	// Limit is the page size: 0 means DefaultPageSize, capped at
	// MaxPageSize.
	Limit int
}

// OpsPage is one page of the operator's listing, newest first.
type OpsPage struct {
	// Tasks hold the task records without Result, Error, InputResponses
	// and Params of input requests (Find reads a whole task).
	Tasks []*Task
	// Next is the cursor of the following page, "" at the end.
	Next string
	// Attempts holds, by task id, the attempts field of the tasks that
	// have one (1 for the others).
	Attempts map[string]int
}

// opsScanFactor bounds the index entries one page reads while filtering
// by tool or by working/input_required: at most Limit*opsScanFactor. A
// page that reaches the bound ends short with a Next cursor, so a page
// costs O(log N + Limit) whatever the index holds.
const opsScanFactor = 20

// opsFields are the task hash fields a listing reads.
var opsFields = []string{fID, fOwner, fTool, fStatus, fMessage, fCreated, fUpdated, fTTL, fLeaseHolder, fLeaseUntil, fFlavour, fPending, fAttempts}

// OpsList returns a page of live tasks across owners, newest first.
func (s *Store) OpsList(ctx context.Context, q OpsQuery) (OpsPage, error) {
	if s.cluster {
		return OpsPage{}, ErrOpsDisabled
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultPageSize
	}
	limit = min(limit, MaxPageSize)
	ks := s.k.ops()
	set := ks[0]
	switch q.Status {
	case "":
	case StatusWorking, StatusInputRequired:
		set = ks[3]
	case StatusCompleted:
		set = ks[4]
	case StatusFailed:
		set = ks[5]
	case StatusCancelled:
		set = ks[6]
	default:
		return OpsPage{}, fmt.Errorf("taskstore: ops list: %w: status %q", ErrBadFilter, q.Status)
	}
	score, member, err := parseOpsCursor(q.Cursor)
	if err != nil {
		return OpsPage{}, err
	}
	now := s.opt.Clock()
	var page OpsPage
	for scanned := 0; scanned < limit*opsScanFactor; {
		batch, err := s.opsRange(ctx, set, score, member, limit)
		if err != nil {
			return OpsPage{}, err
		}
		if len(batch) == 0 {
			return page, nil
		}
		tasks, attempts, err := s.opsRead(ctx, batch)
		if err != nil {
			return OpsPage{}, err
		}
		for i, z := range batch {
			scanned++
			score, member = int64(z.Score), z.Member.(string)
			t := tasks[i]
			if t != nil && t.ExpiresAt().After(now) &&
				(q.Status == "" || t.Status == q.Status) && (q.Tool == "" || t.Tool == q.Tool) {
				page.Tasks = append(page.Tasks, t)
				if n := attempts[i]; n > 0 {
					if page.Attempts == nil {
						page.Attempts = map[string]int{}
					}
					page.Attempts[t.ID] = n
				}
			}
			if len(page.Tasks) == limit {
				page.Next = opsCursor(score, member)
				return page, nil
			}
		}
		if len(batch) < limit {
			return page, nil // the end of the index
		}
	}
	page.Next = opsCursor(score, member)
	return page, nil
}

// opsRange reads up to n members of set below the cursor (score, member),
// newest first: the ones at the cursor's score that sort before member,
// then the ones with a lower score. One round trip.
func (s *Store) opsRange(ctx context.Context, set string, score int64, member string, n int) ([]redis.Z, error) {
	max := "+inf"
	pipe := s.rdb.Pipeline()
	var ties *redis.ZSliceCmd
	if member != "" {
		sc := strconv.FormatInt(score, 10)
		ties = pipe.ZRevRangeByScoreWithScores(ctx, set, &redis.ZRangeBy{Min: sc, Max: sc})
		max = "(" + sc
	}
	rest := pipe.ZRevRangeByScoreWithScores(ctx, set, &redis.ZRangeBy{Min: "-inf", Max: max, Count: int64(n)})
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("taskstore: ops list: %w", classify(ctx, err))
	}
	var out []redis.Z
	if ties != nil {
		for _, z := range ties.Val() { // same score: members in reverse order
			if m, _ := z.Member.(string); m < member && len(out) < n {
				out = append(out, z)
			}
		}
	}
	for _, z := range rest.Val() {
		if len(out) == n {
			break
		}
		out = append(out, z)
	}
	return out, nil
}

// opsRead reads the listing fields of the members' tasks, nil for a task
// that is gone, and their attempts fields (0 without). One round trip.
func (s *Store) opsRead(ctx context.Context, batch []redis.Z) ([]*Task, []int, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(batch))
	for i, z := range batch {
		id, tag, _ := splitOpsMember(z.Member.(string))
		cmds[i] = pipe.HMGet(ctx, s.k.taskByTag(tag, id), opsFields...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("taskstore: ops read: %w", classify(ctx, err))
	}
	out := make([]*Task, len(batch))
	attempts := make([]int, len(batch))
	for i, c := range cmds {
		m := map[string]string{}
		for j, v := range c.Val() {
			if str, ok := v.(string); ok {
				m[opsFields[j]] = str
			}
		}
		if t, ok := decodeTask(m); ok {
			out[i] = t
			attempts[i], _ = strconv.Atoi(m[fAttempts])
		}
	}
	return out, attempts, nil
}

// OpsFind returns the whole task with this id, whoever owns it: the
// console's task page and cancel. ErrNotFound when the index does not
// know it (or it is gone), ErrExpired when its ttl has elapsed.
func (s *Store) OpsFind(ctx context.Context, id string) (*Task, error) {
	if s.cluster {
		return nil, ErrOpsDisabled
	}
	if !validID(id) {
		return nil, fmt.Errorf("taskstore: ops find %s: %w", id, ErrNotFound)
	}
	v, err := s.rdb.HGet(ctx, s.k.ops()[2], id).Result()
	tag, _, _ := strings.Cut(v, "|") // "<ownerTag>|<tool>"
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("taskstore: ops find %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("taskstore: ops find %s: %w", id, classify(ctx, err))
	}
	m, err := s.rdb.HGetAll(ctx, s.k.taskByTag(tag, id)).Result()
	if err != nil {
		return nil, fmt.Errorf("taskstore: ops find %s: %w", id, classify(ctx, err))
	}
	t, ok := decodeTask(m)
	if !ok || ownerTag(t.Owner) != tag {
		return nil, fmt.Errorf("taskstore: ops find %s: %w", id, ErrNotFound)
	}
	if !t.ExpiresAt().After(s.opt.Clock()) {
		return nil, fmt.Errorf("taskstore: ops find %s: %w", id, ErrExpired)
	}
	return t, nil
}

func opsCursor(score int64, member string) string {
	return strconv.FormatInt(score, 10) + "." + member
}

func parseOpsCursor(c string) (int64, string, error) {
	if c == "" {
		return 0, "", nil
	}
	sc, m, ok := strings.Cut(c, ".")
	n, err := strconv.ParseInt(sc, 10, 64)
	if _, _, valid := splitOpsMember(m); !ok || err != nil || !valid {
		return 0, "", fmt.Errorf("taskstore: ops list: %w", ErrBadCursor)
	}
	return n, m, nil
}

// OpsInput is one input request of a task as the console shows it: its
// key, its method while outstanding (an answered request's method is not
// kept), and whether it was answered.
type OpsInput struct {
	Key      string
	Method   string
	Answered bool
}

// OpsInputs lists every input request ever issued for t, outstanding
// ones with their method. Keys are sorted.
func (s *Store) OpsInputs(ctx context.Context, t *Task) ([]OpsInput, error) {
	m, err := s.rdb.HGetAll(ctx, s.k.task(t.Owner, t.ID)).Result()
	if err != nil {
		return nil, fmt.Errorf("taskstore: ops inputs %s: %w", t.ID, classify(ctx, err))
	}
	var out []OpsInput
	for f := range m {
		key, ok := strings.CutPrefix(f, prefixUsedKey)
		if !ok {
			continue
		}
		in := OpsInput{Key: key, Answered: true}
		if r, ok := t.InputRequests[key]; ok {
			in.Method, in.Answered = r.Method, false
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b OpsInput) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// ReplicasSeen returns the replicas that published their latencies
// (PublishLatencies) within d, with the time of their last publish.
func (s *Store) ReplicasSeen(ctx context.Context, d time.Duration) (map[string]time.Time, error) {
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, s.k.latencyReplicas(), &redis.ZRangeBy{
		Min: strconv.FormatInt(s.nowMS()-d.Milliseconds(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("taskstore: replicas seen: %w", classify(ctx, err))
	}
	out := make(map[string]time.Time, len(zs))
	for _, z := range zs {
		if r, ok := z.Member.(string); ok {
			out[r] = fromMS(int64(z.Score))
		}
	}
	return out, nil
}
