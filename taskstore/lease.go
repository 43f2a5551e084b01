package taskstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Leases say which replica runs a task's upstream call (docs/ARCHITECTURE.md
// invariant 4), as asynq's lease set does. The truth is in the task hash
// (lease_holder, lease_until); the scripts change it atomically with the
// state checks.
//
// Recovery needs to find leases across all owners, so there is one global
// index, the leases ZSET (member "<id>|<owner>", score a deadline). It lives
// in its own Cluster slot, so no script can update it together with a task;
// it is therefore only a hint, kept cheap:
//   - Create with a lease adds the entry in the same pipeline as its script
//     (one round trip on a single node); Claim adds it after its script
//     succeeded;
//   - the score is a lower bound of the deadline: Extend does not touch
//     it; ExtendMany (a replica's batched renewal) re-scores, with one
//     ZADD XX, the entries its previous call renewed, to the deadlines
//     that call set, so a sweep does not meet live leases as long as
//     twice --lease-renew stays under --lease plus the grace (otherwise
//     the sweep re-scores them, as it did before); Release (and
//     FinishAndRelease, when it gave the lease up) removes the entry after
//     its script (one more round trip; a failure leaves it to the sweep);
//   - ListExpiredLeases checks every candidate against its hash, drops
//     entries of tasks that are gone, terminal or released, re-scores
//     extended ones, and returns only leases that really expired.
//
// Recovery loop of a replica: ListExpiredLeases, then for each entry Claim
// it (which succeeds only while it is still expired) and Fail it with a
// clear message, then Release.

// Claim gives the lease of the task to holder for d. It succeeds when nobody
// holds it, when holder already does, or when the current holder's deadline
// plus Options.LeaseGrace has passed. Otherwise ErrLeaseHeld; a terminal
// task: ErrTerminal.
func (s *Store) Claim(ctx context.Context, owner, id, holder string, d time.Duration) error {
	err := s.claim(ctx, owner, id, holder, d)
	if err != nil {
		return fmt.Errorf("taskstore: claim %s: %w", id, err)
	}
	return nil
}

func (s *Store) claim(ctx context.Context, owner, id, holder string, d time.Duration) error {
	if !validID(id) {
		return ErrNotFound
	}
	if holder == "" {
		return fmt.Errorf("empty lease holder")
	}
	now := s.opt.Clock()
	until := now.Add(d).UnixMilli()
	vals, err := s.run(ctx, claimCmd, []string{s.k.task(owner, id)},
		owner, now.UnixMilli(), holder, until, ms(s.opt.LeaseGrace))
	if err != nil {
		return err
	}
	if err := s.replyErr(ctx, owner, id, vals); err != nil {
		return err
	}
	// Index only a successful claim: a failed one must not push the entry
	// of a live holder past its real deadline (the score is a lower bound).
	// A second round trip, since the index is in another Cluster slot.
	m := redis.Z{Score: float64(until), Member: leaseMember(owner, id)}
	return classify(ctx, s.rdb.ZAdd(ctx, s.k.leases(), m).Err())
}

// Extend moves the deadline of holder's lease to now+d. ErrLeaseLost when
// holder no longer holds it (taken over, or released); ErrTerminal when the
// task ended meanwhile (e.g. cancelled): either way the worker should stop.
func (s *Store) Extend(ctx context.Context, owner, id, holder string, d time.Duration) error {
	err := ErrNotFound
	if validID(id) {
		now := s.opt.Clock()
		var vals []interface{}
		vals, err = s.run(ctx, extendCmd, []string{s.k.task(owner, id)},
			owner, now.UnixMilli(), holder, now.Add(d).UnixMilli())
		if err == nil {
			err = s.replyErr(ctx, owner, id, vals)
		}
	}
	if err != nil {
		return fmt.Errorf("taskstore: extend lease %s: %w", id, err)
	}
	return nil
}

// Release gives holder's lease up. ErrLeaseLost when holder does not hold it.
func (s *Store) Release(ctx context.Context, owner, id, holder string) error {
	err := ErrNotFound
	if validID(id) {
		var vals []interface{}
		vals, err = s.run(ctx, releaseCmd, []string{s.k.task(owner, id)}, owner, holder)
		if err == nil {
			err = s.replyErr(ctx, owner, id, vals)
		}
	}
	if err != nil {
		return fmt.Errorf("taskstore: release lease %s: %w", id, err)
	}
	// The index entry is only a hint: if this fails, a sweep drops it.
	_ = s.rdb.ZRem(ctx, s.k.leases(), leaseMember(owner, id)).Err()
	return nil
}

// ExpiredLease is a non-terminal task whose worker lease expired: its
// replica is presumed dead.
type ExpiredLease struct {
	Owner  string
	ID     string
	Holder string
	// From is the holder an earlier takeover (Claim) took the lease from,
	// if one did: the replica whose worker ran the task. Holder is then a
	// replica that claimed it but did not finish its recovery (the write
	// failing the task was lost to a store outage, or it died too).
	From string
	// Deadline is the lease's deadline as stored (not counting the grace).
	Deadline time.Time
	// Durable: the task may run again or re-attach (it has a rerun spec,
	// rerun.go); its recovery begins an attempt rather than failing it.
	Durable bool
}

// ListExpiredLeases returns up to limit non-terminal tasks whose lease
// deadline plus Options.LeaseGrace has passed, oldest first, and tidies the
// leases index on the way. Three round trips: read the index, read the
// candidates' hashes, fix the index.
func (s *Store) ListExpiredLeases(ctx context.Context, limit int) ([]ExpiredLease, error) {
	out, err := s.listExpiredLeases(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("taskstore: list expired leases: %w", err)
	}
	return out, nil
}

func (s *Store) listExpiredLeases(ctx context.Context, limit int) ([]ExpiredLease, error) {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	now := s.opt.Clock()
	cutoff := now.Add(-s.opt.LeaseGrace).UnixMilli()
	members, err := s.rdb.ZRangeByScore(ctx, s.k.leases(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(cutoff, 10), Count: int64(limit),
	}).Result()
	if err != nil || len(members) == 0 {
		return nil, classify(ctx, err)
	}

	type cand struct {
		owner, id string
		cmd       *redis.SliceCmd
	}
	cands := make([]cand, 0, len(members))
	var drop []interface{}
	pipe := s.rdb.Pipeline()
	for _, m := range members {
		owner, id, ok := splitLeaseMember(m)
		if !ok {
			drop = append(drop, m)
			continue
		}
		cands = append(cands, cand{owner, id, pipe.HMGet(ctx, s.k.task(owner, id),
			fOwner, fStatus, fCreated, fTTL, fLeaseHolder, fLeaseUntil, fLeaseFrom, fAttempts)})
	}
	if len(cands) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return nil, classify(ctx, err)
		}
	}

	var out []ExpiredLease
	rescore := map[string]float64{}
	for _, c := range cands {
		member := leaseMember(c.owner, c.id)
		v := c.cmd.Val()
		str := func(i int) string { s, _ := v[i].(string); return s }
		num := func(i int) int64 { n, _ := strconv.ParseInt(str(i), 10, 64); return n }
		switch {
		case len(v) < 7 || str(0) != c.owner, // gone (expired) or not ours
			Status(str(1)).Terminal(),
			num(2)+num(3) <= now.UnixMilli(), // expired by the clock
			str(4) == "":                     // released
			drop = append(drop, member)
		case num(5) > cutoff: // extended since it was indexed
			rescore[member] = float64(num(5))
		default:
			out = append(out, ExpiredLease{Owner: c.owner, ID: c.id, Holder: str(4), From: str(6), Deadline: fromMS(num(5)),
				Durable: len(v) > 7 && str(7) != ""})
		}
	}
	if len(drop) > 0 || len(rescore) > 0 {
		args := []interface{}{cutoff, len(drop)}
		args = append(args, drop...)
		for m, score := range rescore {
			args = append(args, m, score)
		}
		if _, err := s.run(ctx, tidyLeasesCmd, []string{s.k.leases()}, args...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rescoreChunk is the most leases index entries one ZADD of ExtendMany
// re-scores.
const rescoreChunk = 1000

// LeaseRef names one task whose lease ExtendMany renews.
type LeaseRef struct{ Owner, ID string }

// ExtendMany is Extend for many tasks of one holder in one pipelined
// round trip (per node, with Cluster): a replica renews the leases of all
// the tasks it runs at once. errs[i] is refs[i]'s outcome, as Extend's.
func (s *Store) ExtendMany(ctx context.Context, refs []LeaseRef, holder string, d time.Duration) []error {
	errs := make([]error, len(refs))
	now := s.opt.Clock()
	args := func(r LeaseRef) []interface{} {
		return []interface{}{r.Owner, now.UnixMilli(), holder, now.Add(d).UnixMilli()}
	}
	cmds := make([]*redis.Cmd, len(refs))
	pipe := s.rdb.Pipeline()
	// The leases index keeps up with the renewals, one command for all:
	// each renewal sends the deadlines the holder's previous one set (a
	// lower bound of the current ones, as the index's scores must be), so
	// a sweep reads only leases that did run out, not every held task's
	// entry once per lease period. XX: an entry the sweep or Release
	// removed stays removed.
	s.rescoreMu.Lock()
	prev := s.rescore[holder]
	s.rescoreMu.Unlock()
	// In commands of rescoreChunk entries: one ZADD of a replica's 10,000s
	// of leases would hold the index's shard for tens of milliseconds.
	for len(prev) > 0 {
		n := min(len(prev), rescoreChunk)
		pipe.ZAddXX(ctx, s.k.leases(), prev[:n]...)
		prev = prev[n:]
	}
	for i, r := range refs {
		if validID(r.ID) {
			cmds[i] = pipe.EvalSha(ctx, extendCmd.Hash(), []string{s.k.task(r.Owner, r.ID)}, args(r)...)
		}
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx)
	}
	// A node without the script (restarted, failed over) gets it with the
	// commands it refused, sent again as EVAL: no node-wide SCRIPT LOAD,
	// which one unreachable node would make fail for all.
	retry := s.rdb.Pipeline()
	for i, c := range cmds {
		if c != nil && c.Err() != nil && redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			r := refs[i]
			cmds[i] = extendCmd.Eval(ctx, retry, []string{s.k.task(r.Owner, r.ID)}, args(r)...)
		}
	}
	if retry.Len() > 0 {
		_, _ = retry.Exec(ctx)
	}
	for i, c := range cmds {
		var err error
		switch {
		case c == nil:
			err = ErrNotFound
		default:
			vals, cerr := c.Slice()
			switch {
			case cerr != nil:
				err = classify(ctx, cerr)
			case len(vals) == 0:
				err = fmt.Errorf("taskstore: empty script reply")
			default:
				err = s.replyErr(ctx, refs[i].Owner, refs[i].ID, vals)
			}
		}
		if err != nil {
			errs[i] = fmt.Errorf("taskstore: extend lease %s: %w", refs[i].ID, err)
		}
	}
	next := make([]redis.Z, 0, len(refs))
	for i, r := range refs {
		if errs[i] == nil {
			next = append(next, redis.Z{Score: float64(now.Add(d).UnixMilli()), Member: leaseMember(r.Owner, r.ID)})
		}
	}
	s.rescoreMu.Lock()
	if s.rescore == nil {
		s.rescore = map[string][]redis.Z{}
	}
	s.rescore[holder] = next
	s.rescoreMu.Unlock()
	return errs
}
