package stdio

// The hop between replicas is authenticated with the secret they share:
//
//	Taskgate-Hop: t=<unix ms>,b=<hex SHA-256 of the body>,s=<hex MAC>
//
// s is HMAC-SHA256(secret, "taskgate-stdio-hop/2" NUL to NUL method NUL
// session id NUL t NUL b NUL), where to is the URL of the replica the hop
// is addressed to (the one the Directory records, that replica's own
// Replicas.URL, which it checks the hop against). The session id and the
// body are bound, so a captured hop cannot be turned into another
// request; the replica is bound, so it cannot be replayed to another
// replica, which never saw it (each remembers only the hops it accepted);
// t must be within MaxSkew of the receiver's clock, so it cannot be
// replayed later, and the receiver remembers the MACs it accepted for that
// long (seenHops), so it cannot be replayed sooner either: the sender never
// signs two hops with the same t (replicas.hopTime), so a repeated MAC is
// a replay. All replicas run one build: a replica signing /1 hops (no
// replica bound) is refused as forged. The header is
// checked before the body is read (a request not signed costs no more
// than its header), then the body against b. A refused hop is answered
// with a precise status and Taskgate-Hop-Error naming the reason, which
// the sender logs and turns into a 502.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taskgate/taskgate/upstream"
)

// HopHeader carries the hop's signature.
const HopHeader = "Taskgate-Hop"

// hopPrincipalHeader carries, base64url, the principal of an initialize
// sent to the replica running its child (principal.go); the MAC binds it
// as the hop's id (principalRecord).
const hopPrincipalHeader = "Taskgate-Hop-Principal"

// hopErrorHeader says why a hop was refused.
const hopErrorHeader = "Taskgate-Hop-Error"

// Why a hop is refused.
var (
	errHopMissing   = errors.New("no " + HopHeader + " header")
	errHopMalformed = errors.New("malformed " + HopHeader + " header")
	errHopStale     = errors.New("the hop's timestamp is too far from this replica's clock")
	errHopForged    = errors.New("the hop's signature does not match")
	errHopBody      = errors.New("the hop's body does not match its signature")
	errHopReplayed  = errors.New("the hop was received already (a replay)")
	errHopBusy      = errors.New("too many hops within the skew window to tell a replay")
)

// hopSig is a parsed Taskgate-Hop value.
type hopSig struct {
	t    int64  // unix ms
	body []byte // SHA-256 of the body
	mac  []byte
}

// signHop is the Taskgate-Hop value for a request sent at now to the
// replica at to (its Replicas.URL).
func signHop(secret []byte, to, method, session string, now time.Time, body []byte) string {
	t, sum := now.UnixMilli(), sha256.Sum256(body)
	return "t=" + strconv.FormatInt(t, 10) + ",b=" + hex.EncodeToString(sum[:]) + ",s=" + hex.EncodeToString(hopMAC(secret, to, method, session, t, sum[:]))
}

func hopMAC(secret []byte, to, method, session string, t int64, bodySum []byte) []byte {
	m := hmac.New(sha256.New, secret)
	for _, part := range []string{"taskgate-stdio-hop/2", to, method, session, strconv.FormatInt(t, 10), hex.EncodeToString(bodySum)} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// parseHop reads a Taskgate-Hop value.
func parseHop(v string) (hopSig, error) {
	if v == "" {
		return hopSig{}, errHopMissing
	}
	parts := strings.Split(v, ",")
	if len(parts) != 3 {
		return hopSig{}, errHopMalformed
	}
	ts, ok1 := strings.CutPrefix(parts[0], "t=")
	body, ok2 := strings.CutPrefix(parts[1], "b=")
	mac, ok3 := strings.CutPrefix(parts[2], "s=")
	if !ok1 || !ok2 || !ok3 || len(ts) == 0 || len(ts) > 15 || ts[0] < '0' || ts[0] > '9' || len(body) != 2*sha256.Size || len(mac) != 2*sha256.Size {
		return hopSig{}, errHopMalformed
	}
	var sig hopSig
	var err error
	if sig.t, err = strconv.ParseInt(ts, 10, 64); err != nil {
		return hopSig{}, errHopMalformed
	}
	if sig.body, err = hex.DecodeString(body); err != nil {
		return hopSig{}, errHopMalformed
	}
	if sig.mac, err = hex.DecodeString(mac); err != nil {
		return hopSig{}, errHopMalformed
	}
	return sig, nil
}

// checkHop verifies a hop's header against the replica it reached (to, its
// own Replicas.URL), its method and session at now, and returns it:
// sig.body is the SHA-256 its body must have.
func checkHop(secret []byte, header, to, method, session string, now time.Time, skew time.Duration) (hopSig, error) {
	sig, err := parseHop(header)
	if err != nil {
		return hopSig{}, err
	}
	if d := now.UnixMilli() - sig.t; d > skew.Milliseconds() || -d > skew.Milliseconds() {
		return hopSig{}, errHopStale
	}
	if !hmac.Equal(sig.mac, hopMAC(secret, to, method, session, sig.t, sig.body)) {
		return hopSig{}, errHopForged
	}
	return sig, nil
}

// maxSeenHops bounds the MACs a replica remembers (about 100 bytes each):
// past it, within one skew window, a hop is refused (503) rather than
// let through unchecked for a replay.
const maxSeenHops = 1 << 18

// seenHops remembers the MACs of the hops accepted while they are fresh
// (within MaxSkew of their t): a hop seen again then is a replay.
type seenHops struct {
	mu    sync.Mutex
	until map[[sha256.Size]byte]int64 // MAC → unix ms its hop stays fresh to
	sweep int                         // size at which the stale ones are swept
}

// add records the hop sig accepted at now, or says it is a replay.
func (s *seenHops) add(sig hopSig, now time.Time, skew time.Duration) error {
	var k [sha256.Size]byte
	copy(k[:], sig.mac)
	ms := now.UnixMilli()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = map[[sha256.Size]byte]int64{}
	}
	if until, ok := s.until[k]; ok && until >= ms {
		return errHopReplayed
	}
	// Amortized: the map doubles between sweeps, until it is full.
	if len(s.until) >= min(s.sweep, maxSeenHops) {
		for k, until := range s.until {
			if until < ms {
				delete(s.until, k)
			}
		}
		s.sweep = max(1024, 2*len(s.until))
	}
	if len(s.until) >= maxSeenHops {
		return errHopBusy
	}
	s.until[k] = sig.t + skew.Milliseconds()
	return nil
}

// hopStatus is the status a refused hop gets.
func hopStatus(err error) int {
	switch {
	case errors.Is(err, errHopMissing), errors.Is(err, errHopStale):
		return http.StatusUnauthorized
	case errors.Is(err, errHopForged), errors.Is(err, errHopBody):
		return http.StatusForbidden
	case errors.Is(err, errHopReplayed):
		return http.StatusConflict
	case errors.Is(err, errHopBusy):
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// HopHandler serves the hop (at HopPath on the gateway's listener): a
// request another replica forwards for a session whose child runs here,
// served as if it came through Transport, and never forwarded again.
// Before JoinReplicas, and for a request without a valid signature, it
// serves nothing.
func (b *Bridge) HopHandler() http.Handler { return http.HandlerFunc(b.serveHop) }

func (b *Bridge) serveHop(w http.ResponseWriter, r *http.Request) {
	rp := b.rep.Load()
	if rp == nil {
		http.NotFound(w, r)
		return
	}
	refuse := func(status int, why string) {
		w.Header().Set(hopErrorHeader, why)
		http.Error(w, why, status)
	}
	// A hop is for a session that exists, or an initialize for the
	// principal whose child runs here (principal.go).
	id, principal := r.Header.Get("Mcp-Session-Id"), ""
	if id == "" {
		raw, err := base64.RawURLEncoding.DecodeString(r.Header.Get(hopPrincipalHeader))
		if err != nil || len(raw) == 0 || r.Method != http.MethodPost {
			refuse(http.StatusBadRequest, "a hop names its session (Mcp-Session-Id), or the principal of its initialize ("+hopPrincipalHeader+")")
			return
		}
		principal = string(raw)
		id = principalRecord(principal)
	}
	sig, err := checkHop(rp.Secret, r.Header.Get(HopHeader), rp.URL, r.Method, hopMACID(id, r.Header.Get(rerunHeader) == "1"), time.Now(), rp.MaxSkew)
	var body []byte
	if err == nil && r.Body != nil {
		if body, err = io.ReadAll(io.LimitReader(r.Body, int64(b.opts.MaxMessage)+1)); err != nil {
			refuse(http.StatusBadRequest, "cannot read the body")
			return
		}
		if len(body) > b.opts.MaxMessage {
			refuse(http.StatusRequestEntityTooLarge, "body larger than the upstream process accepts")
			return
		}
	}
	if got := sha256.Sum256(body); err == nil && !hmac.Equal(got[:], sig.body) {
		err = errHopBody
	}
	if err == nil { // only a hop that verified is remembered
		err = rp.seen.add(sig, time.Now(), rp.MaxSkew)
	}
	if err != nil {
		b.log.Warn().Str("op", "stdio").Str("remote", r.RemoteAddr).Err(err).Msg("a hop from another replica was refused")
		refuse(hopStatus(err), err.Error())
		return
	}
	ctx := rerunLanded(r, context.WithValue(r.Context(), hopKey{}, true)) // respawn.go
	if principal != "" {
		ctx = upstream.WithPrincipal(ctx, upstream.Principal{Key: principal})
	}
	r = r.WithContext(ctx)
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.ServeHTTP(w, r)
}
