package gateway

// Reading an upstream's whole answer to one request, so the gateway can
// change the JSON-RPC response (initialize, tools/list) before the client
// sees it, and writing it back in the form the upstream used:
//
//	application/json   → the new body, Content-Length recomputed
//	text/event-stream  → the events that came before the response, unchanged,
//	                     then the response event (its id:/event: lines kept)
//	                     with the new data, then the rest of the stream relayed
//
// Every other header (Mcp-Session-Id above all) and the status are kept.
// Unknown fields survive: callers change only the members they own.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/taskgate/taskgate/upstream"
)

// maxAnswerBytes bounds an upstream answer read whole (the response plus
// any events before it), as the upstream client bounds one SSE event.
const maxAnswerBytes = 64 << 20

var (
	errAnswerTooLarge = fmt.Errorf("the upstream's answer is larger than %d bytes", maxAnswerBytes)
	errNoAnswer       = errors.New("the upstream closed the stream without answering")
)

// answer is an upstream's answer to one JSON-RPC request, read up to and
// including the response. Close it.
type answer struct {
	resp *http.Response // status and headers; the body is owned by answer
	sse  bool
	// before holds the raw SSE events that came before the response.
	before []byte
	// fields are the response event's lines other than data (id:, event:,
	// retry:, comments), written back in order.
	fields [][]byte
	// rest reads what follows the response event on the stream.
	rest *bufio.Reader
	// msg is the response message as received; result is its result, or nil
	// when the response is a JSON-RPC error (or not a response at all).
	msg    json.RawMessage
	result json.RawMessage
}

// rewritable reports whether resp can be read as an answer: a 2xx JSON or
// SSE response without a content coding. Anything else is relayed as is.
func rewritable(resp *http.Response) bool {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		return false
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/json" || mt == "text/event-stream"
}

// readAnswer reads resp (which must be rewritable) up to the response to
// request id. On error the body is closed.
func readAnswer(resp *http.Response, id json.RawMessage) (*answer, error) {
	a := &answer{resp: resp, sse: isStream(resp)}
	var err error
	if a.sse {
		err = a.readStream(id)
	} else {
		var body []byte
		body, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
		switch {
		case err != nil:
			err = fmt.Errorf("%w: %v", errNoAnswer, err)
		case len(body) > maxAnswerBytes:
			err = errAnswerTooLarge
		default:
			a.msg = body
			_, a.result = parseResponse(body, id)
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
func (a *answer) readStream(id json.RawMessage) error {
	a.rest = bufio.NewReaderSize(a.resp.Body, 16<<10)
	var before bytes.Buffer
	for {
		raw, fields, data, err := readEvent(a.rest)
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return errNoAnswer
			}
			if err == errAnswerTooLarge {
				return err
			}
			return fmt.Errorf("%w: %v", errNoAnswer, err)
		}
		if data != nil {
			if ok, res := parseResponse(data, id); ok {
				a.before, a.fields, a.msg, a.result = before.Bytes(), fields, data, res
				return nil
			}
		}
		if before.Len()+len(raw) > maxAnswerBytes {
			return errAnswerTooLarge
		}
		before.Write(raw)
	}
}

// readEvent reads one SSE event: its raw bytes (through the blank line that
// ends it), its non-data lines, and its data (nil when it has none), per
// WHATWG HTML "Server-sent events". Lines end in LF or CRLF.
func readEvent(br *bufio.Reader) (raw []byte, fields [][]byte, data []byte, err error) {
	var buf bytes.Buffer
	for {
		begin := buf.Len()
		for {
			chunk, err := br.ReadSlice('\n')
			buf.Write(chunk)
			if buf.Len() > maxAnswerBytes {
				return nil, nil, nil, errAnswerTooLarge
			}
			if err == bufio.ErrBufferFull {
				continue // a long line: keep gathering it
			}
			if err != nil {
				if err == io.EOF && buf.Len() > 0 {
					err = io.ErrUnexpectedEOF
				}
				return nil, nil, nil, err
			}
			break
		}
		line := bytes.TrimSuffix(bytes.TrimSuffix(buf.Bytes()[begin:], []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			if data == nil && len(fields) == 0 {
				buf.Reset() // blank lines between events
				continue
			}
			return buf.Bytes(), fields, data, nil
		}
		if v, ok := bytes.CutPrefix(line, []byte("data")); ok && (len(v) == 0 || v[0] == ':') {
			v = bytes.TrimPrefix(bytes.TrimPrefix(v, []byte(":")), []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, v...)
			continue
		}
		fields = append(fields, bytes.Clone(line))
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
	if json.Unmarshal(msg, &env) != nil || env.Method != nil || !sameID(env.ID, id) {
		return false, nil
	}
	if len(env.Error) > 0 && !bytes.Equal(env.Error, []byte("null")) {
		return true, nil
	}
	return len(env.Result) > 0, env.Result
}

// sameID compares two JSON-RPC ids by value (1 and 1.0, "a" and "\u0061").
func sameID(a, b json.RawMessage) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return va == vb
}

// withMember returns the JSON object obj with member key set to value
// (raw JSON); every other member is kept.
func withMember(obj json.RawMessage, key string, value json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	m[key] = value
	return json.Marshal(m)
}

// write sends the answer to the client with msg as the response message;
// nil msg means the response as received.
func (a *answer) write(w http.ResponseWriter, r *http.Request, h *Handler, msg json.RawMessage) {
	if msg == nil {
		msg = a.msg
	}
	upstream.CopyHeader(w.Header(), a.resp.Header)
	if !a.sse {
		w.Header()["Content-Length"] = []string{itoa(int64(len(msg)))}
		w.WriteHeader(a.resp.StatusCode)
		_, _ = w.Write(msg)
		return
	}
	w.WriteHeader(a.resp.StatusCode)
	buf := make([]byte, 0, len(a.before)+len(msg)+64)
	buf = append(buf, a.before...)
	for _, f := range a.fields {
		buf = append(append(buf, f...), '\n')
	}
	// One data line per line of msg (compact JSON has none, but a received
	// message may have been pretty-printed).
	for _, line := range bytes.Split(msg, []byte("\n")) {
		buf = append(append(append(buf, "data: "...), line...), '\n')
	}
	buf = append(buf, '\n')
	if _, err := w.Write(buf); err != nil {
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
				h.log.Debug().Str("op", "relay").Err(err).Msg("upstream stream ended with an error")
			}
			return
		}
	}
}

// close releases the upstream response.
func (a *answer) close() { a.resp.Body.Close() }

// forwardForRewrite sends body upstream with header, for a request whose
// answer the gateway reads whole. On failure it answers the client and
// returns nil; a response it cannot rewrite it relays and returns nil.
func (h *Handler) forwardForRewrite(w http.ResponseWriter, r *http.Request, msg *message, header http.Header, body []byte) *answer {
	resp, err := h.up.Forward(methodCtx(r, msg), http.MethodPost, header, bytes.NewReader(body))
	if err != nil {
		if r.Context().Err() != nil {
			return nil
		}
		e := rpcError(err)
		h.log.Warn().Str("op", "forward").Str("method", msg.method()).Msg(e.Message)
		writeRPCError(w, msg.ID, e)
		return nil
	}
	if !rewritable(resp) {
		h.relay(w, r, resp)
		return nil
	}
	a, err := readAnswer(resp, msg.ID)
	if err != nil {
		if r.Context().Err() != nil {
			return nil
		}
		e := newRPCErr(http.StatusOK, codeInternalError, "upstream "+h.up.URL()+": "+err.Error())
		h.log.Warn().Str("op", "forward").Str("method", msg.method()).Msg(e.Message)
		writeRPCError(w, msg.ID, e)
		return nil
	}
	return a
}

// identityHeader returns header without Accept-Encoding, so the upstream
// answers with a body the gateway can read; header itself is not modified.
// drop names further headers to leave out.
func identityHeader(header http.Header, drop ...string) http.Header {
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
