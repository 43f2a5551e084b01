package upstream

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestFault: each error that fails every call until the operator acts is
// named, and its words (shown by /readyz) never carry the host.
func TestFault(t *testing.T) {
	cert := &x509.Certificate{DNSNames: []string{"secret.internal"}}
	for _, c := range []struct {
		err  error
		want string
		text string
	}{
		{nil, FaultNone, ""},
		{context.DeadlineExceeded, FaultNone, ""},
		{&StatusError{Status: 502}, FaultNone, ""},
		{fmt.Errorf("post: %w", x509.UnknownAuthorityError{Cert: cert}), FaultTLS, "signed by an authority the gateway does not trust"},
		{x509.HostnameError{Certificate: cert, Host: "secret.internal"}, FaultTLS, "not valid for the upstream's host name"},
		{x509.CertificateInvalidError{Cert: cert, Reason: x509.Expired}, FaultTLS, "invalid or expired"},
		{fmt.Errorf("x: %w", &StatusError{Status: 403}), FaultCredentials, "credentials (HTTP 403)"},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, FaultRefused, "check the host and port"},
	} {
		if got := Fault(c.err); got != c.want {
			t.Errorf("Fault(%v) = %q, want %q", c.err, got, c.want)
		}
		text := FaultText(c.err)
		if !strings.Contains(text, c.text) || (c.text == "") != (text == "") || strings.Contains(text, "secret.internal") {
			t.Errorf("FaultText(%v) = %q, want %q and no host", c.err, text, c.text)
		}
	}
}
