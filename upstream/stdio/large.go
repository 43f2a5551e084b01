package stdio

// Lines too large to hold in memory. A stdio message is one line (MCP
// 2025-11-25, Transports, "stdio"), and a tool's answer may be tens of
// megabytes: past spillAt the line goes to an unlinked temporary file while
// a scanner finds its top-level "id" (a TypeScript SDK server writes it
// after "result", so it is not always at the start). An answer to a call
// is then streamed from the file to the call's stream with its id
// rewritten in place; a line over MaxMessage is discarded as it is read,
// and fails only the request its id names.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
)

// spillAt is the line length past which a line is written to a file
// rather than held: the memory an answer takes on its way to the client.
const spillAt = 1 << 20

// members finds a JSON-RPC message's top-level members as its bytes pass,
// in constant memory: the "id" value and its offsets, and whether "method",
// "result" or "error" occur. It assumes valid JSON; on anything else it
// finds nothing useful, which the caller treats as an unnamed line.
type members struct {
	off                 int64 // bytes seen
	depth               int
	inStr, esc          bool
	key                 []byte // the top-level key being read, or last read (capped)
	readingKey          bool
	afterKey            bool // between a top-level key and its value
	inID                bool // reading the top-level "id" value
	id                  []byte
	idStart, idEnd      int64
	method, result, err bool
}

const maxIDBytes = 256

func (m *members) feed(p []byte) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if m.inStr {
			if m.esc {
				m.esc = false
			} else if c == '\\' {
				m.esc = true
			} else if c == '"' {
				m.inStr = false
				if m.readingKey {
					m.readingKey, m.afterKey = false, true
				}
			} else if !m.readingKey && !m.inID {
				// Skip the bulk of a string at once: most of a large line.
				j := bytes.IndexAny(p[i:], "\"\\")
				if j < 0 {
					m.off += int64(len(p) - i)
					return
				}
				i += j - 1
				m.off += int64(j)
				continue
			}
			if m.readingKey && m.inStr && len(m.key) < 16 {
				m.key = append(m.key, c)
			}
			m.noteID(c, i)
			m.off++
			continue
		}
		switch c {
		case '"':
			m.inStr = true
			if m.depth == 1 && !m.afterKey {
				m.readingKey, m.key = true, m.key[:0]
			}
		case '{', '[':
			m.depth++
		case '}', ']':
			if m.depth == 1 && m.inID {
				m.endID()
			}
			m.depth--
		case ',':
			if m.depth == 1 {
				if m.inID {
					m.endID()
				}
				m.afterKey = false
			}
		case ':':
			if m.depth == 1 && m.afterKey {
				switch string(m.key) {
				case "id":
					m.inID, m.idStart, m.id = true, m.off+1, m.id[:0]
				case "method":
					m.method = true
				case "result":
					m.result = true
				case "error":
					m.err = true
				}
				m.off++
				continue
			}
		}
		m.noteID(c, i)
		m.off++
	}
}

// noteID keeps byte c of the id value being read.
func (m *members) noteID(c byte, _ int) {
	if m.inID && m.depth == 1 && len(m.id) < maxIDBytes {
		if len(m.id) == 0 && (c == ' ' || c == '\t' || c == '\r') {
			m.idStart++ // leading blanks are not the value
			return
		}
		m.id = append(m.id, c)
	}
}

func (m *members) endID() {
	m.inID = false
	m.id = bytes.TrimRight(m.id, " \t\r\n")
	m.idEnd = m.idStart + int64(len(m.id))
}

// end notes the end of the line: an id value still being read (a line
// cut short after it) ends there.
func (m *members) end() {
	if m.inID && m.depth == 1 && !m.inStr {
		m.endID()
	}
}

// named is the id when it was read whole.
func (m *members) named() []byte {
	if m.inID || len(m.id) == 0 || len(m.id) >= maxIDBytes {
		return nil
	}
	return m.id
}

// bigLine is a line past spillAt being read: in a file while it stays
// within the limit, else only scanned.
type bigLine struct {
	f    *os.File // nil once over the limit (or when no file could be made)
	size int64
	m    members
	err  error // why the line is not kept
}

func newBigLine(start []byte) *bigLine {
	l := &bigLine{}
	f, err := os.CreateTemp("", "taskgate-stdio-*")
	if err != nil {
		l.err = fmt.Errorf("cannot keep a %d-byte line: %v", len(start), err)
	} else {
		_ = os.Remove(f.Name()) // unlinked: nothing is left behind, whatever happens
		l.f = f
	}
	l.write(start, 0)
	return l
}

// write adds p to the line; max is the limit on the message (0: none),
// which its newline does not count against.
func (l *bigLine) write(p []byte, max int64) {
	l.m.feed(p)
	l.size += int64(len(p))
	if l.f == nil {
		return
	}
	if max > 0 && l.size > max+1 {
		l.discard(fmt.Errorf("its answer is larger than the upstream message limit of %d bytes (--upstream-max-message)", max))
		return
	}
	if _, err := l.f.Write(p); err != nil {
		l.discard(fmt.Errorf("cannot keep a %d-byte line: %v", l.size, err))
	}
}

// discard stops keeping the line, saying why.
func (l *bigLine) discard(why error) {
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
	if l.err == nil {
		l.err = why
	}
}

// bytes reads the kept line back, for the rare large message that is not
// an answer (a notification, a request of the child).
func (l *bigLine) bytes() ([]byte, error) {
	buf := make([]byte, l.size)
	_, err := l.f.ReadAt(buf, 0)
	_ = l.f.Close()
	return buf, err
}

// bigAnswer is a kept answer line for a call, streamed to its client with
// the client's id in place of the bridge's.
type bigAnswer struct {
	f              *os.File
	size           int64
	idStart, idEnd int64
}

// writeTo writes the answer as one SSE event on w, the client's id origID
// spliced in; headers (200, text/event-stream) are sent unless started.
func (a *bigAnswer) writeTo(w http.ResponseWriter, started bool, origID []byte) error {
	defer a.f.Close()
	if !started {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
	}
	parts := []io.Reader{
		bytes.NewReader([]byte("event: message\ndata: ")),
		io.NewSectionReader(a.f, 0, a.idStart),
		bytes.NewReader(origID),
		io.NewSectionReader(a.f, a.idEnd, a.size-a.idEnd),
		bytes.NewReader([]byte("\n\n")),
	}
	_, err := io.Copy(writerOnly{w}, io.MultiReader(parts...))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return err
}

// bytes is the reply's message; one kept in a file is read back whole
// (for the bridge's own requests, whose answers it parses).
func (r reply) bytes() ([]byte, error) {
	if r.big == nil {
		return r.msg, nil
	}
	defer r.big.release()
	buf := make([]byte, r.big.size)
	if _, err := r.big.f.ReadAt(buf, 0); err != nil {
		return nil, err
	}
	return buf, nil
}

func (a *bigAnswer) release() {
	if a != nil {
		_ = a.f.Close()
	}
}

// writerOnly hides a ResponseWriter's ReadFrom, so io.Copy uses its own
// bounded buffer.
type writerOnly struct{ io.Writer }
