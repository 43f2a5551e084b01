package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"strconv"
	"syscall"
)

// Why an exchange with the upstream failed in a way that fails every call
// until the operator acts, so that health checks and logs can name the fix.
const (
	FaultNone        = ""
	FaultTLS         = "tls"         // the upstream's certificate is not trusted (RFC 8446 §4.4.2.4)
	FaultCredentials = "credentials" // 401/403 to the gateway's own credentials (RFC 9110 §15.5.2, §15.5.4)
	FaultRefused     = "refused"     // nothing listens at the address
)

// Fault classifies err, an exchange's error: FaultNone when it says
// nothing the operator must fix (a timeout, a 5xx, a JSON-RPC error).
func Fault(err error) string {
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var status *StatusError
	switch {
	case err == nil:
		return FaultNone
	case errors.As(err, &certErr), errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalid):
		return FaultTLS
	case errors.As(err, &status) && (status.Status == http.StatusUnauthorized || status.Status == http.StatusForbidden):
		return FaultCredentials
	case errors.Is(err, syscall.ECONNREFUSED):
		return FaultRefused
	}
	return FaultNone
}

// CertificateWhy says in a few words why the upstream's certificate was
// rejected, never naming a host (clients may read it): "" when err is no
// certificate error.
func CertificateWhy(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknownCA):
		return "signed by an authority the gateway does not trust"
	case errors.As(err, &hostErr):
		return "not valid for the upstream's host name"
	case errors.As(err, &invalid):
		return "invalid or expired"
	case Fault(err) == FaultTLS:
		return "rejected"
	}
	return ""
}

// HasCredentials reports whether the client sends credentials of its own
// (Options.Header, or the URL's user): a 401 to such a request says they
// are wrong, where one to a client's request says nothing of the gateway's.
func (c *Client) HasCredentials() bool {
	return c.basic != "" || len(c.header) > 0
}

// FaultText says why err fails every call and what fixes it, or "" when
// it is no such fault (Fault). It never names the upstream's
// address: /readyz shows it.
func FaultText(err error) string {
	var status *StatusError
	switch Fault(err) {
	case FaultTLS:
		return "TLS: the upstream's certificate is " + CertificateWhy(err) +
			"; give the CA that signs it with --upstream-ca (a PEM file)"
	case FaultCredentials:
		errors.As(err, &status)
		return "the upstream refused the gateway's credentials (HTTP " + strconv.Itoa(status.Status) +
			"); check --upstream-header (e.g. 'Authorization: Bearer ${TOKEN}')"
	case FaultRefused:
		return "the upstream is unreachable: connection refused (nothing listens at the address); check the host and port of --upstream"
	}
	return ""
}
