package stdio

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/upstream"
)

// openAs opens a session of principal key through b and returns its id;
// it may run off the test's goroutine.
func openAs(b *Bridge, key string) (string, error) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	ctx := upstream.WithPrincipal(context.Background(), upstream.Principal{Key: key})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Transport: b.Transport()}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		return "", fmt.Errorf("initialize of %s: HTTP %d, no session: %s", key, resp.StatusCode, answer)
	}
	return sid, nil
}

// principalChildren are the running children of principal key on rs, and
// the replica of the last one found.
func principalChildren(key string, rs ...*replica) (n int, on *replica) {
	for _, r := range rs {
		r.b.mu.Lock()
		for _, p := range r.b.fleet.procs {
			if p.principal == key && p.alive() {
				n, on = n+1, r
			}
		}
		r.b.mu.Unlock()
	}
	return n, on
}

// openAtOnce opens a session of principal key through each of rs at the
// same moment and returns their ids.
func openAtOnce(t *testing.T, key string, rs ...*replica) []string {
	t.Helper()
	sids, errs := make([]string, len(rs)), make([]error, len(rs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			sids[i], errs[i] = openAs(r.b, key)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return sids
}

// oneChild checks that principal key has exactly one child across rs,
// recorded as on its replica, serving every session of sids (through
// whichever replica), and returns that replica.
func oneChild(t *testing.T, dir Directory, key string, sids []string, rs ...*replica) *replica {
	t.Helper()
	n, on := principalChildren(key, rs...)
	if n != 1 {
		t.Fatalf("%d children of %s across the replicas, want 1", n, key)
	}
	if url, err := dir.SessionReplica(context.Background(), principalRecord(key)); url != on.srv.URL || err != nil {
		t.Fatalf("record of %s's child = %q, %v; want %q, the replica running it", key, url, err, on.srv.URL)
	}
	p := childOf(on.b, sids[0])
	for i, sid := range sids {
		if childOf(on.b, sid) != p || p == nil {
			t.Fatalf("session %d of %s is not on her one child", i+1, key)
		}
		c := &client{t: t, h: &http.Client{Transport: rs[i%len(rs)].b.Transport()}, key: key, sid: sid}
		text := fmt.Sprint("session ", i+1)
		if got := c.tool(2, "echo", map[string]any{"text": text}); got != text {
			t.Fatalf("a call of session %d of %s: %q", i+1, key, got)
		}
	}
	return on
}

// TestReplicasPrincipalChildRace (issue 37, item 3): the first sessions of
// one principal started at the same moment on two replicas make one
// child: the replica whose claim on the principal's record lost hops its
// session to the winner.
func TestReplicasPrincipalChildRace(t *testing.T) {
	dir, _ := newDirectory(t)
	per := func(o *Options) { o.PerPrincipal = true; o.SessionIdle = time.Hour }
	a, b := startReplicaWith(t, dir, per, nil), startReplicaWith(t, dir, per, nil)
	sids := openAtOnce(t, "alice", a, b)
	oneChild(t, dir, "alice", sids, a, b)
}

// TestReplicasPrincipalClaimTakeover: a claim on a principal's child left
// by a replica that died (its record not expired yet, nobody answering at
// its URL) is taken over by one replica, even when two start a session of
// that principal at once; the other hops to it.
func TestReplicasPrincipalClaimTakeover(t *testing.T) {
	dir, _ := newDirectory(t)
	per := func(o *Options) { o.PerPrincipal = true; o.SessionIdle = time.Hour }
	a, b := startReplicaWith(t, dir, per, nil), startReplicaWith(t, dir, per, nil)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nobody answers there any more
	if owner, err := dir.ClaimSessionReplica(context.Background(), principalRecord("alice"), dead.URL, "", time.Hour); owner != dead.URL || err != nil {
		t.Fatalf("the dead replica's claim: %q, %v", owner, err)
	}
	sids := openAtOnce(t, "alice", a, b)
	on := oneChild(t, dir, "alice", sids, a, b)
	// Renewal keeps the winner's claim, and does not make the other
	// replica's.
	on.b.renew(on.b.rep.Load())
	other := a
	if on == a {
		other = b
	}
	other.b.renew(other.b.rep.Load())
	if url, _ := dir.SessionReplica(context.Background(), principalRecord("alice")); url != on.srv.URL {
		t.Fatalf("record of alice's child after the renewals = %q, want %q", url, on.srv.URL)
	}
}

// TestReplicasSessionIDNamesPrincipalRecord: a request whose session id
// is the record id of a principal's child (NUL bytes, which no client's
// id has: validSessionID) reaches no session and leaves the claim alone,
// on the replica holding it (where a session id recorded as here but
// unknown has its record removed) and on another (which would hop by it):
// it cannot end a principal's claim so that her next session starts a
// second child.
func TestReplicasSessionIDNamesPrincipalRecord(t *testing.T) {
	dir, _ := newDirectory(t)
	per := func(o *Options) { o.PerPrincipal = true; o.SessionIdle = time.Hour }
	a, b := startReplicaWith(t, dir, per, nil), startReplicaWith(t, dir, per, nil)
	alice, bob := newClientAs(t, a.b, "alice"), newClientAs(t, a.b, "bob")
	for _, r := range []*replica{a, b} {
		forged := &client{t: t, h: &http.Client{Transport: r.b.Transport()}, key: "bob", sid: principalRecord("alice")}
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			var resp *http.Response
			if method == http.MethodPost {
				resp = forged.post(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}})
			} else {
				resp = forged.send(method, nil)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("%s naming alice's child's record: HTTP %d, want 404", method, resp.StatusCode)
			}
		}
	}
	// A removal queued by them goes before that of a session ended now.
	deleteSession(t, a.b, bob.sid)
	waitFor(t, "the record of bob's ended session to go", func() bool {
		url, err := dir.SessionReplica(context.Background(), bob.sid)
		return url == "" && err == nil
	})
	if url, err := dir.SessionReplica(context.Background(), principalRecord("alice")); url != a.srv.URL || err != nil {
		t.Fatalf("record of alice's child = %q, %v; want A's", url, err)
	}
	later := newClientAs(t, b.b, "alice")
	oneChild(t, dir, "alice", []string{alice.sid, later.sid}, a, b)
}

// TestReplicasPrincipalClaimNotRemovedByFormerHolder: a replica whose
// claim on a principal's child another replica took over (it did not
// answer a hop in time, and lives on) keeps serving the sessions it has;
// when the last of them ends, or when it leaves, the claim it removes is
// only its own: the new holder's stays, so that the principal's next
// session joins the new holder's child rather than starting another.
func TestReplicasPrincipalClaimNotRemovedByFormerHolder(t *testing.T) {
	dir, _ := newDirectory(t)
	per := func(o *Options) { o.PerPrincipal = true; o.SessionIdle = time.Hour }
	a, b, c := startReplicaWith(t, dir, per, nil), startReplicaWith(t, dir, per, nil), startReplicaWith(t, dir, per, nil)
	rec := principalRecord("alice")
	// takeOver moves the claim as a replica does from one that does not
	// answer the hop (forwardPrincipal).
	takeOver := func(from, to *replica) {
		t.Helper()
		if owner, err := dir.ClaimSessionReplica(context.Background(), rec, to.srv.URL, from.srv.URL, time.Hour); owner != to.srv.URL || err != nil {
			t.Fatalf("takeover: %q, %v", owner, err)
		}
	}
	old := newClientAs(t, a.b, "alice")
	takeOver(a, b)
	current := newClientAs(t, b.b, "alice")
	if childOf(b.b, current.sid) == nil {
		t.Fatal("alice's session through B is not on a child of B")
	}
	// Her last session on A ends; a removal A queues after hers is done.
	bob := newClientAs(t, a.b, "bob")
	deleteSession(t, a.b, old.sid)
	deleteSession(t, a.b, bob.sid)
	waitFor(t, "the record of bob's child on A to go", func() bool {
		url, err := dir.SessionReplica(context.Background(), principalRecord("bob"))
		return url == "" && err == nil
	})
	if url, err := dir.SessionReplica(context.Background(), rec); url != b.srv.URL || err != nil {
		t.Fatalf("record of alice's child after A's last session of hers ended = %q, %v; want B's, which runs it", url, err)
	}
	// C runs a child of hers whose claim B took back; C leaves.
	takeOver(b, c)
	onC := newClientAs(t, c.b, "alice")
	if childOf(c.b, onC.sid) == nil {
		t.Fatal("alice's session through C is not on a child of C")
	}
	takeOver(c, b)
	c.leave(context.Background())
	if url, err := dir.SessionReplica(context.Background(), rec); url != b.srv.URL || err != nil {
		t.Fatalf("record of alice's child after C left = %q, %v; want B's", url, err)
	}
	later := newClientAs(t, a.b, "alice")
	oneChild(t, dir, "alice", []string{current.sid, later.sid}, a, b)
}

// TestReplicasPrincipalClaimLostAtJoin: a replica whose claim on a
// principal's child another replica took over (it did not answer a hop in
// time, and lives on) stops seating the principal's new sessions on its
// own child once its renewal finds the claim taken: they hop to the new
// holder's child, while the sessions already on its child stay there. When
// the claim is free again, its child takes new sessions again.
func TestReplicasPrincipalClaimLostAtJoin(t *testing.T) {
	dir, _ := newDirectory(t)
	per := func(o *Options) { o.PerPrincipal = true; o.SessionIdle = time.Hour }
	a, b := startReplicaWith(t, dir, per, nil), startReplicaWith(t, dir, per, nil)
	rec := principalRecord("alice")
	old := newClientAs(t, a.b, "alice")
	if owner, err := dir.ClaimSessionReplica(context.Background(), rec, b.srv.URL, a.srv.URL, time.Hour); owner != b.srv.URL || err != nil {
		t.Fatalf("takeover: %q, %v", owner, err)
	}
	current := newClientAs(t, b.b, "alice")
	if childOf(b.b, current.sid) == nil {
		t.Fatal("alice's session through B is not on a child of B")
	}
	a.b.renew(a.b.rep.Load()) // finds the claim B's
	later := newClientAs(t, a.b, "alice")
	if p := childOf(b.b, later.sid); p == nil || p != childOf(b.b, current.sid) || childOf(a.b, later.sid) != nil {
		t.Fatal("alice's new session through A, whose claim B took over, is not on her child on B")
	}
	if got := later.tool(2, "echo", map[string]any{"text": "via A"}); got != "via A" {
		t.Fatalf("a call of alice's new session through A: %q", got)
	}
	if got := old.tool(2, "echo", map[string]any{"text": "old"}); got != "old" || childOf(a.b, old.sid) == nil {
		t.Fatalf("a call of alice's session on A's child: %q; want it served there still", got)
	}
	// B's sessions of hers end, and B releases the claim: A's child is
	// hers to join again.
	deleteSession(t, b.b, current.sid)
	deleteSession(t, b.b, later.sid)
	waitFor(t, "B's claim on alice's child to go", func() bool {
		url, err := dir.SessionReplica(context.Background(), rec)
		return url == "" && err == nil
	})
	again := newClientAs(t, a.b, "alice")
	if p := childOf(a.b, again.sid); p == nil || p != childOf(a.b, old.sid) {
		t.Fatal("alice's session through A, once the claim was free, is not on her child on A")
	}
	if url, err := dir.SessionReplica(context.Background(), rec); url != a.srv.URL || err != nil {
		t.Fatalf("record of alice's child = %q, %v; want A's, which runs it", url, err)
	}
}
