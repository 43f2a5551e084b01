package stdio

// The hop between replicas is authenticated with the secret they share:
//
//	Taskgate-Hop: t=<unix ms>,s=<64 hex digits>
//
// s is HMAC-SHA256(secret, "taskgate-stdio-hop/1" NUL method NUL session
// id NUL t NUL hex(SHA-256(body))). The session id and the body are bound,
// so a captured hop cannot be turned into another request; t must be
// within MaxSkew of the receiver's clock, so it cannot be replayed later.
// A refused hop is answered with a precise status and Taskgate-Hop-Error
// naming the reason, which the sender logs and turns into a 502.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HopHeader carries the hop's signature.
const HopHeader = "Taskgate-Hop"

// hopErrorHeader says why a hop was refused.
const hopErrorHeader = "Taskgate-Hop-Error"

// Why a hop is refused.
var (
	errHopMissing   = errors.New("no " + HopHeader + " header")
	errHopMalformed = errors.New("malformed " + HopHeader + " header")
	errHopStale     = errors.New("the hop's timestamp is too far from this replica's clock")
	errHopForged    = errors.New("the hop's signature does not match")
)

// signHop is the Taskgate-Hop value for a request sent at now.
func signHop(secret []byte, method, session string, now time.Time, body []byte) string {
	t := now.UnixMilli()
	return "t=" + strconv.FormatInt(t, 10) + ",s=" + hex.EncodeToString(hopMAC(secret, method, session, t, body))
}

func hopMAC(secret []byte, method, session string, t int64, body []byte) []byte {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, secret)
	for _, part := range []string{"taskgate-stdio-hop/1", method, session, strconv.FormatInt(t, 10), hex.EncodeToString(sum[:])} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// parseHop reads a Taskgate-Hop value: its timestamp (unix ms) and MAC.
func parseHop(v string) (int64, []byte, error) {
	if v == "" {
		return 0, nil, errHopMissing
	}
	ts, sig, ok := strings.Cut(v, ",")
	if !ok {
		return 0, nil, errHopMalformed
	}
	ts, ok1 := strings.CutPrefix(ts, "t=")
	sig, ok2 := strings.CutPrefix(sig, "s=")
	if !ok1 || !ok2 || len(ts) == 0 || len(ts) > 15 || len(sig) != 2*sha256.Size {
		return 0, nil, errHopMalformed
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || t < 0 || ts[0] == '+' {
		return 0, nil, errHopMalformed
	}
	mac, err := hex.DecodeString(sig)
	if err != nil {
		return 0, nil, errHopMalformed
	}
	return t, mac, nil
}

// checkHop verifies a hop's header against its method, session and body
// at now.
func checkHop(secret []byte, header, method, session string, body []byte, now time.Time, skew time.Duration) error {
	t, mac, err := parseHop(header)
	if err != nil {
		return err
	}
	if d := now.UnixMilli() - t; d > skew.Milliseconds() || -d > skew.Milliseconds() {
		return errHopStale
	}
	if !hmac.Equal(mac, hopMAC(secret, method, session, t, body)) {
		return errHopForged
	}
	return nil
}

// hopStatus is the status a refused hop gets.
func hopStatus(err error) int {
	switch {
	case errors.Is(err, errHopMissing), errors.Is(err, errHopStale):
		return http.StatusUnauthorized
	case errors.Is(err, errHopForged):
		return http.StatusForbidden
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
	if r.Header.Get("Mcp-Session-Id") == "" { // a hop is for a session that exists
		refuse(http.StatusBadRequest, "a hop names its session (Mcp-Session-Id)")
		return
	}
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(io.LimitReader(r.Body, int64(b.opts.MaxLine)+1)); err != nil {
			refuse(http.StatusBadRequest, "cannot read the body")
			return
		}
		if len(body) > b.opts.MaxLine {
			refuse(http.StatusRequestEntityTooLarge, "body larger than the upstream process accepts")
			return
		}
	}
	if err := checkHop(rp.Secret, r.Header.Get(HopHeader), r.Method, r.Header.Get("Mcp-Session-Id"), body, time.Now(), rp.MaxSkew); err != nil {
		b.log.Warn().Str("op", "stdio").Str("remote", r.RemoteAddr).Err(err).Msg("a hop from another replica was refused")
		refuse(hopStatus(err), err.Error())
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), hopKey{}, true))
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.ServeHTTP(w, r)
}
