package upstream

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// maxEventBytes bounds one SSE event, so a broken upstream cannot make the
// gateway buffer without limit. Tool results larger than this are refused.
const maxEventBytes = 64 << 20

// event is one server-sent event (WHATWG HTML, "Server-sent events",
// interpretation of the event stream). Only the fields MCP uses are kept.
type event struct {
	ID   string
	Name string
	Data []byte
}

// sseReader parses a text/event-stream body.
type sseReader struct {
	r    *bufio.Reader
	data bytes.Buffer
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 16<<10)}
}

// Next returns the next event that carries data. It returns io.EOF when the
// stream ends cleanly between events, and io.ErrUnexpectedEOF when it ends
// inside one.
func (s *sseReader) Next() (event, error) {
	var ev event
	s.data.Reset()
	pending := false
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && pending {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		if len(line) == 0 { // blank line: dispatch
			if s.data.Len() == 0 {
				pending = false
				ev = event{}
				continue
			}
			ev.Data = bytes.Clone(s.data.Bytes())
			return ev, nil
		}
		pending = true
		if line[0] == ':' { // comment, e.g. keep-alive
			continue
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(field) {
		case "data":
			if s.data.Len() > 0 {
				s.data.WriteByte('\n')
			}
			if s.data.Len()+len(value) > maxEventBytes {
				return ev, fmt.Errorf("SSE event larger than %d bytes", maxEventBytes)
			}
			s.data.Write(value)
		case "event":
			ev.Name = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.ID = string(value)
			}
		}
	}
}

// readLine returns one line without its terminator (LF, CRLF or CR-LF as
// written by common servers; a lone CR is rare enough that it is treated as
// part of the line's end only before LF).
func (s *sseReader) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// A long data line: gather it.
		buf := bytes.Clone(line)
		for err == bufio.ErrBufferFull {
			if len(buf) > maxEventBytes {
				return nil, fmt.Errorf("SSE line longer than %d bytes", maxEventBytes)
			}
			line, err = s.r.ReadSlice('\n')
			buf = append(buf, line...)
		}
		line = buf
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
