package upstreamside

// Reading an upstream's whole answer to one request, so the gateway can
// change the JSON-RPC response (initialize, tools/list, server/discover)
// before the client sees it, and writing it back in the form the upstream
// used:
//
//	application/json   → the new body, Content-Length recomputed
//	text/event-stream  → the events that came before the response, unchanged,
//	                     then the response event (its id:/event: lines kept)
//	                     with the new data, then the rest of the stream relayed
//
// Every other header (Mcp-Session-Id above all) and the status are kept.
// Unknown fields survive: callers change only the members they own.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// MaxAnswerBytes bounds an upstream answer read whole (the response plus
// any events before it), as the upstream client bounds one SSE event.
const MaxAnswerBytes = 64 << 20

var (
	errAnswerTooLarge = fmt.Errorf("the upstream's answer is larger than %d bytes", MaxAnswerBytes)
	errNoAnswer       = errors.New("the upstream closed the stream without answering")
)

// Answer is an upstream's answer to one JSON-RPC request, read up to and
// including the response. Close it.
type Answer struct {
	Resp *http.Response // status and headers; the body is owned by answer
	sse  bool
	// before holds the raw SSE events that came before the response.
	before []byte
	// fields are the response event's lines other than data (id:, event:,
	// retry:, comments), written back in order.
	fields [][]byte
	// rest reads what follows the response event on the stream.
	rest io.Reader
	// Msg is the response message as received; result is its result, or nil
	// when the response is a JSON-RPC error (or not a response at all).
	Msg    json.RawMessage
	Result json.RawMessage
}

// Rewritable reports whether resp can be read as an answer: a 2xx JSON or
// SSE response without a content coding. Anything else is relayed as is.
func Rewritable(resp *http.Response) bool {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		return false
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/json" || mt == "text/event-stream"
}

// ReadAnswer reads resp (which must be Rewritable) up to the response to
// request id. On error the body is closed.
func ReadAnswer(resp *http.Response, id json.RawMessage) (*Answer, error) {
	a := &Answer{Resp: resp, sse: IsStream(resp)}
	var err error
	if a.sse {
		err = a.readStream(id)
	} else {
		var body []byte
		body, err = io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
		switch {
		case err != nil:
			err = fmt.Errorf("%w: %v", errNoAnswer, err)
		case len(body) > MaxAnswerBytes:
			err = errAnswerTooLarge
		default:
			a.Msg = body
			_, a.Result = parseResponse(body, id)
		}
	}
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	return a, nil
}

// readStream reads SSE events until the response to id; the events before
// it are kept raw.
func (a *Answer) readStream(id json.RawMessage) error {
	sr := mcpwire.NewRawReader(a.Resp.Body, MaxAnswerBytes)
	a.rest = sr.Rest()
	var before bytes.Buffer
	for {
		ev, err := sr.Next()
		switch {
		case err == io.EOF, err == io.ErrUnexpectedEOF:
			return errNoAnswer
		case errors.Is(err, mcpwire.ErrTooLarge):
			return errAnswerTooLarge
		case err != nil:
			return fmt.Errorf("%w: %v", errNoAnswer, err)
		}
		if ev.Data != nil {
			if ok, res := parseResponse(ev.Data, id); ok {
				a.before, a.fields, a.Msg, a.Result = before.Bytes(), ev.Fields, ev.Data, res
				return nil
			}
		}
		if before.Len()+len(ev.Raw) > MaxAnswerBytes {
			return errAnswerTooLarge
		}
		before.Write(ev.Raw)
	}
}

// parseResponse reports whether msg is a JSON-RPC response (result or
// error) to request id, and returns its result (nil for an error).
func parseResponse(msg, id json.RawMessage) (ok bool, result json.RawMessage) {
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(msg, &env) != nil || env.Method != nil || !mcpwire.SameID(env.ID, id) {
		return false, nil
	}
	if len(env.Error) > 0 && !bytes.Equal(env.Error, []byte("null")) {
		return true, nil
	}
	return len(env.Result) > 0, env.Result
}

// Write sends the answer to the client with msg as the response message;
// nil msg means the response as received.
func (a *Answer) Write(w http.ResponseWriter, r *http.Request, log zerolog.Logger, msg json.RawMessage) {
	if msg == nil {
		msg = a.Msg
	}
	CopyUpstreamHeader(w.Header(), a.Resp.Header)
	if !a.sse {
		w.Header()["Content-Length"] = []string{strconv.FormatInt(int64(len(msg)), 10)}
		w.WriteHeader(a.Resp.StatusCode)
		_, _ = w.Write(msg)
		return
	}
	w.WriteHeader(a.Resp.StatusCode)
	buf := make([]byte, 0, len(a.before)+len(msg)+64)
	buf = append(buf, a.before...)
	if _, err := w.Write(mcpwire.AppendEvent(buf, nonNil(a.fields), msg)); err != nil {
		return
	}
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	// The server usually ends the stream after the response; whatever else
	// it sends is relayed as it comes.
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	for {
		n, err := a.rest.Read(*bp)
		if n > 0 {
			if _, werr := w.Write((*bp)[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			if err != io.EOF && r.Context().Err() == nil {
				log.Debug().Str("op", "relay").Err(err).Msg("upstream stream ended with an error")
			}
			return
		}
	}
}

// nonNil keeps the response event's own lines, none included: its data
// is written back under exactly the lines it came with.
func nonNil(fields [][]byte) [][]byte {
	if fields == nil {
		return [][]byte{}
	}
	return fields
}

// Close releases the upstream response.
func (a *Answer) Close() { a.Resp.Body.Close() }

// ForwardForRewrite sends body upstream with header, for a request whose
// answer the gateway reads whole. On failure it answers the client and
// returns nil; a response it cannot rewrite it relays and returns nil.
func (u *Side) ForwardForRewrite(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, header http.Header, body []byte) *Answer {
	resp, err := u.client.Forward(obs.MethodCtx(r, msg), http.MethodPost, header, bytes.NewReader(body))
	if err != nil {
		if r.Context().Err() != nil {
			return nil
		}
		e := core.RPCError(err, core.Era2025)
		u.log.Warn().Str("op", "forward").Str("method", msg.MethodName()).Msg(e.Message)
		mcpwire.WriteError(w, msg.ID, e)
		return nil
	}
	if !Rewritable(resp) {
		u.Relay(w, r, resp)
		return nil
	}
	a, err := ReadAnswer(resp, msg.ID)
	if err != nil {
		if r.Context().Err() != nil {
			return nil
		}
		e := mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, "the upstream's answer could not be read: "+err.Error())
		u.log.Warn().Str("op", "forward").Str("method", msg.MethodName()).Msg(e.Message)
		mcpwire.WriteError(w, msg.ID, e)
		return nil
	}
	return a
}

// IdentityHeader returns header without Accept-Encoding, so the upstream
// answers with a body the gateway can read; header itself is not modified.
// drop names further headers to leave out.
func IdentityHeader(header http.Header, drop ...string) http.Header {
	out := make(http.Header, len(header))
	for k, vv := range header {
		out[k] = vv
	}
	delete(out, "Accept-Encoding")
	for _, k := range drop {
		delete(out, k)
	}
	return out
}

// AskStateless sends a 2026-07-28 client's msg to a stateless upstream as
// it is and reads the answer whole (statelessAnswer); nil means the client
// was answered already.
func (u *Side) AskStateless(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) *Answer {
	resp, _, err := u.PostStateless(r.WithContext(obs.MethodCtx(r, msg)), msg.Raw, true)
	if err != nil {
		u.StatelessFailure(w, r, msg, err)
		return nil
	}
	return u.StatelessAnswer(w, r, msg, resp)
}

// StatelessAnswer reads a stateless upstream's answer to msg whole; an
// answer it cannot read that way is relayed, or failed, and nil returned.
func (u *Side) StatelessAnswer(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, resp *http.Response) *Answer {
	if !Rewritable(resp) {
		u.Relay(w, r, resp)
		return nil
	}
	a, err := ReadAnswer(resp, msg.ID)
	if err != nil {
		u.StatelessFailure(w, r, msg, err)
		return nil
	}
	return a
}
