package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"syscall"
)

// ErrUnreachable is matched (errors.Is) by every error that means no HTTP
// response came back from the upstream: refused, reset, timed out, DNS,
// TLS. The concrete error is an *UnreachableError naming the upstream.
var ErrUnreachable = errors.New("upstream unreachable")

// UnreachableError says that the upstream could not be reached and why, in
// words an operator can act on. Its message does not name the upstream's
// address, which clients may see; URL (its password masked) is for logs.
type UnreachableError struct {
	URL    string
	Reason string // "connection refused", "timed out", ...
	Err    error
}

func (e *UnreachableError) Error() string {
	return "the upstream is unreachable: " + e.Reason
}

func (e *UnreachableError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }

// unreachable wraps a transport error. A cancelled context is returned as
// is: the caller went away, the upstream did nothing wrong.
func (c *Client) unreachable(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return &UnreachableError{URL: c.URL(), Reason: Reason(err), Err: err}
}

// Reason turns a transport error into a short phrase for clients: what
// happened, never which address or host name (the error itself keeps them,
// for logs).
func Reason(err error) string {
	var dnsErr *net.DNSError
	var tlsErr *tls.RecordHeaderError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case errors.As(err, &dnsErr):
		return "cannot resolve the upstream's host name"
	case errors.As(err, &tlsErr), errors.As(err, &certErr):
		return "TLS handshake failed"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to host"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error() // without the addresses OpError adds
	}
	return err.Error()
}
