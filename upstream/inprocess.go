package upstream

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// InProcessTransport returns an http.RoundTripper that serves each request
// with h in process: no socket, so nothing else on the machine can reach
// what h fronts (a stdio child, an HTTP+SSE session). The response body
// streams as h writes it; the response's headers go out at h's first
// write (or WriteHeader).
func InProcessTransport(h http.Handler) http.RoundTripper { return inProcess{h} }

type inProcess struct{ h http.Handler }

func (rt inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil {
		req.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	rw := &pipeResponse{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil { // as net/http's server would: this request fails, the process lives
				rw.WriteHeader(http.StatusInternalServerError)
				_ = pw.CloseWithError(fmt.Errorf("in-process upstream: panic serving %s: %v", req.Method, v))
			}
			rw.WriteHeader(http.StatusOK) // no-op when written
			_ = pw.Close()
			_ = req.Body.Close()
		}()
		rt.h.ServeHTTP(rw, req)
	}()
	select {
	case <-rw.ready:
	case <-req.Context().Done():
		_ = pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status: strconv.Itoa(rw.status) + " " + http.StatusText(rw.status), StatusCode: rw.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rw.sent, Body: pr, ContentLength: -1, Request: req,
	}, nil
}

// pipeResponse is the handler's ResponseWriter: headers go out once, the
// body through the pipe.
type pipeResponse struct {
	header http.Header
	sent   http.Header
	status int
	once   sync.Once
	ready  chan struct{}
	pw     *io.PipeWriter
}

func (p *pipeResponse) Header() http.Header { return p.header }

func (p *pipeResponse) WriteHeader(status int) {
	p.once.Do(func() {
		p.status, p.sent = status, p.header.Clone()
		close(p.ready)
	})
}

func (p *pipeResponse) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.pw.Write(b)
}

func (p *pipeResponse) Flush() {}
