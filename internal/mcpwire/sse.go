package mcpwire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Server-Sent Events (WHATWG HTML, "Server-sent events"), as MCP's
// Streamable HTTP transport uses them: each event's data is one JSON-RPC
// message.

// ErrTooLarge: an event is larger than the Reader's limit.
var ErrTooLarge = errors.New("SSE event too large")

// Event is one server-sent event. Only the fields MCP uses are decoded.
type Event struct {
	ID   string
	Name string
	// Data is the event's data lines joined with "\n"; nil when the event
	// has no data line at all.
	Data []byte
	// Fields are the event's other lines (id:, event:, retry:, comments),
	// in order, and Raw its bytes through the blank line that ends it;
	// both only from a reader made with NewRawReader.
	Fields [][]byte
	Raw    []byte
}

// Reader parses a text/event-stream body into events.
type Reader struct {
	src io.Reader
	br  *bufio.Reader // nil after Release, until it is needed again
	max int
	raw bool
	// Yield makes Next return an empty Event (no data, no error) instead
	// of reading on past a blank line when nothing more is buffered, so
	// that a caller can wait for the source apart (keep-alive comments
	// included) before calling Next again.
	Yield bool
	buf   bytes.Buffer // raw mode: the bytes of the event being read
	data  bytes.Buffer
}

// NewReader reads events of at most max bytes of data from r.
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{src: r, br: bufio.NewReaderSize(r, readerSize), max: max}
}

// readerSize is a Reader's buffer: most events fit in it.
const readerSize = 16 << 10

// bufPool holds the buffers Release gave back.
var bufPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readerSize) }}

// Release gives the reader's buffer back to a pool if it holds nothing
// (Buffered is 0), until the reader needs one again: for a caller that
// waits for the source apart between events (Yield), perhaps for long.
// Call it only while the source has reported neither its end nor an error
// (which the buffer would keep for Next).
func (r *Reader) Release() {
	if r.br != nil && r.br.Buffered() == 0 {
		r.br.Reset(nil)
		bufPool.Put(r.br)
		r.br = nil
	}
}

// buffer is the reader's buffer, from the pool after Release.
func (r *Reader) buffer() *bufio.Reader {
	if r.br == nil {
		r.br = bufPool.Get().(*bufio.Reader)
		r.br.Reset(r.src)
	}
	return r.br
}

// NewRawReader is NewReader keeping each event's raw bytes and non-data
// lines, for a caller that passes events on as received. max then bounds
// the raw bytes of an event.
func NewRawReader(r io.Reader, max int) *Reader {
	rd := NewReader(r, max)
	rd.raw = true
	return rd
}

// Buffered is how many bytes the reader holds that Next has not yet
// consumed: 0 means the next event is read from r.
func (r *Reader) Buffered() int {
	if r.br == nil {
		return 0
	}
	return r.br.Buffered()
}

// Rest reads what follows the last event Next returned, buffered bytes
// first.
func (r *Reader) Rest() io.Reader { return r.buffer() }

// Next returns the next event: its lines up to a blank line. A reader made
// with NewReader returns only events with data (a comment such as a
// keep-alive, or an event of only retry:, is skipped); a raw reader returns
// every event, blank lines between events skipped. It returns io.EOF when the stream ends cleanly
// between events, io.ErrUnexpectedEOF when it ends inside one, and an
// error wrapping ErrTooLarge past the limit. Lines end in LF or CRLF.
func (r *Reader) Next() (Event, error) {
	var ev Event
	r.data.Reset()
	r.buf.Reset()
	lines, hasData := 0, false
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF && lines > 0 {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		if len(line) == 0 { // blank line: dispatch
			if lines == 0 || (!r.raw && r.data.Len() == 0) {
				r.buf.Reset()
				r.data.Reset()
				lines, hasData, ev = 0, false, Event{}
				if r.Yield && r.br.Buffered() == 0 {
					return ev, nil
				}
				continue
			}
			if hasData {
				ev.Data = append([]byte{}, r.data.Bytes()...)
			}
			if r.raw {
				ev.Raw = bytes.Clone(r.buf.Bytes())
			}
			return ev, nil
		}
		lines++
		field, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		if string(field) == "data" {
			if hasData {
				r.data.WriteByte('\n')
			}
			hasData = true
			if r.data.Len()+len(value) > r.max {
				return ev, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, r.max)
			}
			r.data.Write(value)
			continue
		}
		if r.raw {
			ev.Fields = append(ev.Fields, bytes.Clone(line))
		}
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.ID = string(value)
			}
		}
	}
}

// readLine returns one line without its terminator (LF or CRLF); a last
// line without one is returned as a line, and the next call gets io.EOF.
func (r *Reader) readLine() ([]byte, error) {
	br := r.buffer()
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// A long line: gather it.
		buf := bytes.Clone(line)
		for err == bufio.ErrBufferFull {
			if len(buf) > r.max {
				return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrTooLarge, r.max)
			}
			line, err = br.ReadSlice('\n')
			buf = append(buf, line...)
		}
		line = buf
	}
	if r.raw {
		if r.buf.Len()+len(line) > r.max {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, r.max)
		}
		r.buf.Write(line)
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			return bytes.TrimRight(line, "\r"), nil
		}
		return nil, err
	}
	line = line[:len(line)-1]
	return bytes.TrimSuffix(line, []byte{'\r'}), nil
}

// AppendEvent appends an SSE event whose data is the message msg: one data
// line per line of msg (compact JSON has one), after the lines fields
// (id:, event:, …; nil means "event: message").
func AppendEvent(buf []byte, fields [][]byte, msg []byte) []byte {
	if fields == nil {
		buf = append(buf, "event: message\n"...)
	}
	for _, f := range fields {
		buf = append(append(buf, f...), '\n')
	}
	for len(msg) > 0 {
		line := msg
		if i := bytes.IndexByte(msg, '\n'); i >= 0 {
			line, msg = msg[:i], msg[i+1:]
		} else {
			msg = nil
		}
		buf = append(append(append(buf, "data: "...), line...), '\n')
	}
	return append(buf, '\n')
}

// Writer writes JSON-RPC messages as SSE events on an HTTP response, each
// flushed at once. The response's headers (200, text/event-stream) go out
// with the first event.
type Writer struct {
	w       http.ResponseWriter
	flusher http.Flusher
	started bool
}

// NewWriter returns a Writer on w; nothing is written until the first
// event.
func NewWriter(w http.ResponseWriter) *Writer {
	f, _ := w.(http.Flusher)
	return &Writer{w: w, flusher: f}
}

// Started reports whether an event was written, so the response is a
// stream: an answer must then go out as one more event.
func (s *Writer) Started() bool { return s.started }

// Send marshals v and writes it as one event.
func (s *Writer) Send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.SendRaw(data)
}

// SendRaw writes one event whose data is the JSON message msg.
func (s *Writer) SendRaw(msg []byte) error {
	s.start()
	if _, err := s.w.Write(AppendEvent(make([]byte, 0, len(msg)+24), nil, msg)); err != nil {
		return err
	}
	s.flush()
	return nil
}

// Comment writes an SSE comment line (": text"), which clients ignore and
// idle-timeout proxies count as traffic.
func (s *Writer) Comment(text string) error {
	s.start()
	if _, err := io.WriteString(s.w, ": "+text+"\n\n"); err != nil {
		return err
	}
	s.flush()
	return nil
}

// Pump sends each message from ch as an event until ch is closed, a
// write fails (the client left), or done is closed: the body of a GET
// stream that a local bridge (stdio child, HTTP+SSE server) feeds.
func (s *Writer) Pump(ch <-chan []byte, done <-chan struct{}) {
	for {
		select {
		case m, ok := <-ch:
			if !ok || s.SendRaw(m) != nil {
				return
			}
		case <-done:
			return
		}
	}
}

func (s *Writer) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
}

func (s *Writer) flush() {
	if s.flusher != nil {
		s.flusher.Flush()
	}
}
