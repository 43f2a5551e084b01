package auth

import (
	"fmt"
	"net/http"
	"strings"
)

// MaxTokenSize bounds a bearer token: real access tokens are a few KiB at
// most, and a larger one is refused before anything parses or hashes it.
const MaxTokenSize = 16 << 10

// BearerToken is the bearer token of a request's Authorization header
// (RFC 6750 §2.1): exactly one header, the scheme "Bearer" in any case
// (RFC 9110 §11.1), one space or more, then a token68 (RFC 9110 §11.2).
// It returns ErrNoToken when there is no Authorization or it carries
// another scheme, and an error wrapping ErrBadRequest or ErrInvalidToken
// otherwise; the messages never quote the token.
func BearerToken(h http.Header) (string, error) {
	values := h.Values("Authorization")
	switch {
	case len(values) == 0:
		return "", ErrNoToken
	case len(values) > 1:
		return "", fmt.Errorf("%w: %d Authorization headers; send one", ErrBadRequest, len(values))
	}
	return parseBearer(values[0])
}

func parseBearer(v string) (string, error) {
	if len(v) > len("Bearer ")+MaxTokenSize {
		return "", fmt.Errorf("%w: Authorization of %d bytes, over the %d a token may have", ErrBadRequest, len(v), MaxTokenSize)
	}
	scheme, rest, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", ErrNoToken // another scheme (Basic, DPoP...) is no bearer token
	}
	token := strings.TrimLeft(rest, " ")
	switch {
	case token == "":
		return "", fmt.Errorf("%w: empty bearer token", ErrInvalidToken)
	case len(token) > MaxTokenSize:
		return "", fmt.Errorf("%w: bearer token of %d bytes, over %d", ErrBadRequest, len(token), MaxTokenSize)
	case !isToken68(token):
		return "", fmt.Errorf("%w: the bearer token has characters a token68 may not have", ErrInvalidToken)
	}
	return token, nil
}

// isToken68 reports whether s is a token68: 1*( ALPHA / DIGIT / "-" / "." /
// "_" / "~" / "+" / "/" ) *"=" (RFC 9110 §11.2).
func isToken68(s string) bool {
	end := len(s)
	for end > 0 && s[end-1] == '=' {
		end--
	}
	if end == 0 {
		return false
	}
	for i := 0; i < end; i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}
