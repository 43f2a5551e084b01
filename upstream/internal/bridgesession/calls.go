package bridgesession

// The call table of a local bridge: the client's requests in flight on a
// peer (a stdio child's pipes, an HTTP+SSE session), their ids and progress
// tokens rewritten to the bridge's, and the peer's requests sent to a
// client (asks.go). One copy for upstream/stdio and upstream/sse.

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// Core is what every bridge session holds for the call table: its GET
// streams, its counts, what its client declared. A bridge's session type
// embeds it; the bridge's mutex guards it.
type Core[A any] struct {
	// Streams are its open GET streams and the peer's requests held for one.
	Streams Streams[A]
	// Caps is what its client declared at initialize; nil: not known (a
	// shared stdio child's session), which refuses no request.
	Caps map[string]json.RawMessage
	// Ended: the session is over; nothing more is sent for it.
	Ended bool
	// Inflight counts its calls in flight; LastUsed is when one last ended
	// or a request came (the idle reaper's clock).
	Inflight int
	LastUsed time.Time
	// Asks counts the peer's requests sent to its client, not answered.
	Asks int
}

func (c *Core[A]) core() *Core[A] { return c }

// Session is a bridge's session type: a pointer to a struct that embeds
// Core.
type Session[A any] interface {
	comparable
	core() *Core[A]
}

// Call is one client request in flight on peer Peer of session Sess.
type Call[S comparable, P comparable, R any] struct {
	Key       string          // the bridge's id, as JSON
	OrigID    json.RawMessage // the client's id
	Method    string          // the client's method (CarrierLocked)
	OrigToken json.RawMessage // the client's progressToken, nil if none
	Token     string          // the bridge's token for it
	Sess      S
	Peer      P
	Started   time.Time
	Out       chan []byte // requests and progress for the call's stream
	Final     chan R      // its reply, exactly one (FinishLocked)
}

// Config is what a Table needs of its bridge.
type Config[P comparable, R any] struct {
	// Prefix starts the bridge's ids, tokens and ask ids ("taskgate-stdio").
	Prefix string
	// Mu is the bridge's mutex, which guards the table and its sessions.
	Mu sync.Locker
	// Reply makes a call's reply of a message.
	Reply func(msg []byte) R
	// SendLocked hands msg to peer p without waiting for it, under Mu.
	SendLocked func(p P, msg []byte)
	// WriteReply writes reply r of call c on its answer (sse: whether the
	// SSE stream started); nil: r's message as an SSE event.
	WriteReply func(w http.ResponseWriter, sse *mcpwire.Writer, origID json.RawMessage, r R)
	// Release frees a reply nobody will write (the client left); may be nil.
	Release func(r R)
	// Message is the reply's bytes for SSE (WriteReply nil).
	Message func(r R) []byte
	// Log gets the table's events under Op.
	Log zerolog.Logger
	Op  string
}

// Table is a bridge's calls in flight, the peer's requests sent to its
// clients (asks), and the progress tokens it gave. It has no lock of its
// own: the methods named ...Locked are called under Config.Mu, the others
// take it.
type Table[S Session[*Ask[S, P, R]], P comparable, R any] struct {
	cfg    Config[P, R]
	seq    atomic.Uint64
	calls  map[string]*Call[S, P, R]
	asks   map[string]*Ask[S, P, R]
	tokens map[string]*Call[S, P, R]
}

// NewTable is an empty table.
func NewTable[S Session[*Ask[S, P, R]], P comparable, R any](cfg Config[P, R]) *Table[S, P, R] {
	return &Table[S, P, R]{cfg: cfg, calls: map[string]*Call[S, P, R]{}, asks: map[string]*Ask[S, P, R]{},
		tokens: map[string]*Call[S, P, R]{}}
}

// NewCall is a call of session s on peer p for the client's request
// (id, method); not yet in the table (Prepare, then AddLocked).
func (t *Table[S, P, R]) NewCall(s S, p P, id json.RawMessage, method string) *Call[S, P, R] {
	n := strconv.FormatUint(t.seq.Add(1), 10)
	return &Call[S, P, R]{Key: strconv.Quote(t.cfg.Prefix + "-" + n), OrigID: id, Method: method, Sess: s, Peer: p,
		Started: time.Now(), Out: make(chan []byte, 64), Final: make(chan R, 1)}
}

// Prepare is the client's request body with the bridge's id and, when it
// names one, the bridge's progress token (the clients' would collide on
// one peer). The token is random: a peer cannot guess the token of a call
// it does not serve (Progress also checks the peer).
func (t *Table[S, P, R]) Prepare(c *Call[S, P, R], body, params json.RawMessage) ([]byte, error) {
	out, err := mcpwire.WithMember(body, "id", json.RawMessage(c.Key))
	if err != nil {
		return nil, err
	}
	tok, ok := mcpwire.Meta(params)["progressToken"]
	if !ok {
		return out, nil
	}
	c.OrigToken, c.Token = tok, t.cfg.Prefix+"-progress-"+uuid.NewString()
	params = mcpwire.WithMeta(params, "progressToken", c.Token)
	return mcpwire.WithMember(out, "params", params)
}

// AddLocked puts c in flight.
func (t *Table[S, P, R]) AddLocked(c *Call[S, P, R]) {
	t.calls[c.Key] = c
	if c.Token != "" {
		t.tokens[c.Token] = c
	}
	c.Sess.core().Inflight++
}

// Add is AddLocked under the bridge's mutex.
func (t *Table[S, P, R]) Add(c *Call[S, P, R]) {
	t.cfg.Mu.Lock()
	defer t.cfg.Mu.Unlock()
	t.AddLocked(c)
}

// CallsLocked are the calls in flight, in no order.
func (t *Table[S, P, R]) CallsLocked() []*Call[S, P, R] {
	calls := make([]*Call[S, P, R], 0, len(t.calls))
	for _, c := range t.calls {
		calls = append(calls, c)
	}
	return calls
}

// Made is the number of calls made (NewCall) so far.
func (t *Table[S, P, R]) Made() uint64 { return t.seq.Load() }

// CallLocked is the call in flight under the bridge's id key; nil if none.
func (t *Table[S, P, R]) CallLocked(key string) *Call[S, P, R] { return t.calls[key] }

// InFlightLocked reports whether c is still in flight.
func (t *Table[S, P, R]) InFlightLocked(c *Call[S, P, R]) bool { return t.calls[c.Key] == c }

// FinishLocked ends call c with its reply: the one place a reply is sent,
// by whoever takes c out of the table.
func (t *Table[S, P, R]) FinishLocked(c *Call[S, P, R], r R) {
	t.EndCallLocked(c)
	c.Final <- r // never blocks: one reply per call, in a buffer of one
}

// EndCallLocked forgets call c, and refuses the peer's requests sent on it
// that were not answered.
func (t *Table[S, P, R]) EndCallLocked(c *Call[S, P, R]) {
	delete(t.calls, c.Key)
	delete(t.tokens, c.Token)
	core := c.Sess.core()
	core.Inflight--
	core.LastUsed = time.Now()
	for k, a := range t.asks {
		if a.Call == c {
			t.forgetAskLocked(k, a)
			t.cfg.SendLocked(a.Peer, ErrorMessage(a.PeerID, mcpwire.CodeInternalError, "the client's call ended before it answered"))
		}
	}
}

// Drop forgets call c without an answer; false if it was not in flight.
func (t *Table[S, P, R]) Drop(c *Call[S, P, R]) bool {
	t.cfg.Mu.Lock()
	defer t.cfg.Mu.Unlock()
	if t.calls[c.Key] != c {
		return false
	}
	t.EndCallLocked(c)
	return true
}

// CancelLocked fails call c, if still in flight, as cancelled for reason,
// and returns the notifications/cancelled to send its peer; nil when c was
// not in flight.
func (t *Table[S, P, R]) CancelLocked(c *Call[S, P, R], reason string) []byte {
	if t.calls[c.Key] != c {
		return nil
	}
	t.FinishLocked(c, t.cfg.Reply(ErrorMessage(c.OrigID, mcpwire.CodeInternalError, "the request was cancelled: "+reason)))
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": json.RawMessage(c.Key), "reason": reason}})
}

// Cancel tells c's peer that the client gave up on call c.
func (t *Table[S, P, R]) Cancel(c *Call[S, P, R], reason string) {
	t.cfg.Mu.Lock()
	defer t.cfg.Mu.Unlock()
	if msg := t.CancelLocked(c, reason); msg != nil {
		t.cfg.SendLocked(c.Peer, msg)
	}
}

// Respond hands the peer's response msg (its id the bridge's) to its call,
// with the client's id; false when it answers no call of peer p.
func (t *Table[S, P, R]) Respond(p P, id json.RawMessage, msg []byte) bool {
	t.cfg.Mu.Lock()
	defer t.cfg.Mu.Unlock()
	c := t.calls[string(id)]
	if c == nil || c.Peer != p {
		return false
	}
	out, err := mcpwire.WithMember(msg, "id", c.OrigID)
	if err != nil {
		out = ErrorMessage(c.OrigID, mcpwire.CodeInternalError, "the upstream sent a malformed response")
	}
	t.FinishLocked(c, t.cfg.Reply(out))
	return true
}

// FinishPeer ends call key of peer p with reply r; false: no such call.
func (t *Table[S, P, R]) FinishPeer(p P, key []byte, r func(c *Call[S, P, R]) R) bool {
	t.cfg.Mu.Lock()
	defer t.cfg.Mu.Unlock()
	c := t.calls[string(key)]
	if c == nil || c.Peer != p {
		return false
	}
	t.FinishLocked(c, r(c))
	return true
}

// FailPeerLocked ends every call of peer p with the reply msg makes for it
// and forgets the requests p sent; it returns how many calls failed.
func (t *Table[S, P, R]) FailPeerLocked(p P, msg func(c *Call[S, P, R]) []byte) int {
	n := 0
	for _, c := range t.calls {
		if c.Peer == p {
			n++
			t.FinishLocked(c, t.cfg.Reply(msg(c)))
		}
	}
	for k, a := range t.asks {
		if a.Peer == p {
			t.forgetAskLocked(k, a)
		}
	}
	return n
}

// Progress passes peer p's progress notification msg to the call whose
// token it names, with the client's own token. The call must be one p
// serves: a peer never reaches another peer's call. Best effort: a full
// stream misses it.
func (t *Table[S, P, R]) Progress(p P, msg, params []byte) {
	var pp struct {
		Token json.RawMessage `json:"progressToken"`
	}
	_ = json.Unmarshal(params, &pp)
	var tok string
	_ = json.Unmarshal(pp.Token, &tok)
	t.cfg.Mu.Lock()
	c := t.tokens[tok]
	t.cfg.Mu.Unlock()
	if c == nil || c.Peer != p {
		// A call already answered, a token the bridge never gave, or
		// another peer's call.
		t.cfg.Log.Debug().Str("op", t.cfg.Op).Msg("a progress notification for no call of this upstream; dropped")
		return
	}
	withTok, err := mcpwire.WithMember(params, "progressToken", c.OrigToken)
	if err != nil {
		return
	}
	out, err := mcpwire.WithMember(msg, "params", withTok)
	if err != nil {
		return
	}
	select {
	case c.Out <- out:
	default: // never stall the peer's reader
	}
}

// ClientCancelled is the client's notifications/cancelled body (params
// its params) for its session s, rewritten to name the bridge's id of the
// call, with that call; nil when s has no such call in flight.
func (t *Table[S, P, R]) ClientCancelled(s S, body, params []byte) (*Call[S, P, R], []byte) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(params, &p)
	t.cfg.Mu.Lock()
	var c *Call[S, P, R]
	for _, x := range t.calls {
		if x.Sess == s && mcpwire.SameID(x.OrigID, p.RequestID) {
			c = x
			break
		}
	}
	t.cfg.Mu.Unlock()
	if c == nil {
		return nil, nil
	}
	np, _ := mcpwire.WithMember(params, "requestId", json.RawMessage(c.Key))
	out, _ := mcpwire.WithMember(body, "params", np)
	return c, out
}

// CallsOf are session s's calls in flight, oldest first.
func (t *Table[S, P, R]) CallsOf(s S) []*Call[S, P, R] {
	t.cfg.Mu.Lock()
	var calls []*Call[S, P, R]
	for _, c := range t.calls {
		if c.Sess == s {
			calls = append(calls, c)
		}
	}
	t.cfg.Mu.Unlock()
	sort.Slice(calls, func(i, j int) bool { return calls[i].Started.Before(calls[j].Started) })
	return calls
}

// CarrierLocked is the call of s that carries the peer's request naming
// no call: its one call in flight, when that is a tools/call,
// resources/read or prompts/get (mcpwire.CarriesUnrelated); nil: its GET
// stream. A tools/list of the client's connect, in flight when the peer
// asks for roots, would close its stream with its answer before the
// client answered.
func (t *Table[S, P, R]) CarrierLocked(s S) *Call[S, P, R] {
	if s.core().Inflight != 1 {
		return nil
	}
	for _, c := range t.calls {
		if c.Sess == s && mcpwire.CarriesUnrelated(c.Method) {
			return c
		}
	}
	return nil
}

// CallsOfPeerLocked are the calls in flight on peer p (the shared stdio
// child's routing).
func (t *Table[S, P, R]) CallsOfPeerLocked(p P) []*Call[S, P, R] {
	var calls []*Call[S, P, R]
	for _, c := range t.calls {
		if c.Peer == p {
			calls = append(calls, c)
		}
	}
	return calls
}

// Stream writes what belongs to call c on its SSE answer until its reply;
// a client that leaves cancels it (Cancel).
func (t *Table[S, P, R]) Stream(w http.ResponseWriter, r *http.Request, c *Call[S, P, R]) {
	defer func() { // a reply that came as the client left
		select {
		case rp := <-c.Final:
			if t.cfg.Release != nil {
				t.cfg.Release(rp)
			}
		default:
		}
	}()
	sse := mcpwire.NewWriter(w)
	for {
		select {
		case m := <-c.Out:
			if sse.SendRaw(m) != nil {
				t.Cancel(c, "the client went away")
				return
			}
		case rp := <-c.Final:
			for drained := false; !drained; { // what came before the answer goes first
				select {
				case x := <-c.Out:
					_ = sse.SendRaw(x)
				default:
					drained = true
				}
			}
			if t.cfg.WriteReply != nil {
				t.cfg.WriteReply(w, sse, c.OrigID, rp)
				return
			}
			_ = sse.SendRaw(t.cfg.Message(rp))
			return
		case <-r.Context().Done():
			t.Cancel(c, "the client went away")
			return
		}
	}
}

// ResultMessage is a JSON-RPC result.
func ResultMessage(id, result json.RawMessage) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// ErrorMessage is a JSON-RPC error.
func ErrorMessage(id json.RawMessage, code int, message string) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
}

// JSONError answers a POST with a JSON-RPC error and an HTTP status.
func JSONError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(ErrorMessage(id, code, message))
}

// Envelope is what a bridge reads of a JSON-RPC message to route it.
type Envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// ReadPost reads the one JSON-RPC message of a POST, at most max bytes,
// or answers why not (tooLarge: the message for one over max; what: the
// bridge, for a body that is not one message) and reports false.
func ReadPost(w http.ResponseWriter, r *http.Request, max int, tooLarge, what string) ([]byte, Envelope, bool) {
	var env Envelope
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(max)+1))
	switch {
	case err != nil:
		JSONError(w, http.StatusBadRequest, nil, mcpwire.CodeParseError, "cannot read the request body")
	case len(body) > max:
		JSONError(w, http.StatusRequestEntityTooLarge, nil, mcpwire.CodeInvalidRequest, tooLarge)
	case json.Unmarshal(body, &env) != nil:
		JSONError(w, http.StatusBadRequest, nil, mcpwire.CodeParseError, "Parse error: "+what+" takes one JSON-RPC message per POST")
	default:
		return body, env, true
	}
	return nil, env, false
}

// Post is what a bridge does with each kind of client POST Dispatch
// routes; S is its session type, the zero S none. Each handler answers on
// w.
type Post[S comparable] struct {
	// Initialize opens a session (whatever Mcp-Session-Id says: the
	// bridge judges it).
	Initialize func(w http.ResponseWriter, r *http.Request, body []byte, env Envelope)
	// Session is r's session, touched; the zero S when there is none.
	Session func(r *http.Request) S
	// Answer takes the client's answer to a request of the peer.
	Answer func(w http.ResponseWriter, r *http.Request, s S, body []byte, env Envelope)
	// Notification takes a client notification.
	Notification func(w http.ResponseWriter, r *http.Request, s S, body []byte, env Envelope)
	// Request takes a client request.
	Request func(w http.ResponseWriter, r *http.Request, s S, body []byte, env Envelope)
	// AnswersPing: the bridge answers a client's ping itself, with an
	// empty result (MCP 2025-11-25, schema, PingRequest), instead of
	// passing it to the peer as a Request.
	AnswersPing bool
}

// Dispatch routes a client's message (body, read by ReadPost as env): an
// initialize to p.Initialize; anything else of no session to NoSession;
// then by its shape (JSON-RPC 2.0: a response has an id and no method, a
// notification a method and no id) to p.Answer, p.Notification or
// p.Request, and what is none of them answered -32600 Invalid Request.
func Dispatch[S comparable](w http.ResponseWriter, r *http.Request, body []byte, env Envelope, p Post[S]) {
	if env.Method == "initialize" {
		p.Initialize(w, r, body, env)
		return
	}
	var none S
	s := p.Session(r)
	if s == none {
		NoSession(w, r, env.ID)
		return
	}
	switch {
	case env.Method == "" && len(env.ID) > 0: // the client answers a peer's request
		p.Answer(w, r, s, body, env)
	case env.Method != "" && len(env.ID) == 0:
		p.Notification(w, r, s, body, env)
	case env.Method == "ping" && p.AnswersPing:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(ResultMessage(env.ID, json.RawMessage(`{}`)))
	case env.Method != "":
		p.Request(w, r, s, body, env)
	default:
		JSONError(w, http.StatusBadRequest, env.ID, mcpwire.CodeInvalidRequest, "Invalid Request")
	}
}

// NoSession answers a request of no session the bridge knows: 400 without
// Mcp-Session-Id, else 404 (MCP 2025-11-25, Transports, "Session
// Management": the client initializes again).
func NoSession(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
	if r.Header.Get("Mcp-Session-Id") == "" {
		JSONError(w, http.StatusBadRequest, id, mcpwire.CodeInvalidRequest, "Bad Request: Mcp-Session-Id is required (initialize first)")
		return
	}
	JSONError(w, http.StatusNotFound, id, mcpwire.CodeSessionNotFound, "Session not found")
}
