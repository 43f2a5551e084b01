package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// DefaultLeeway is the clock skew allowed on exp, nbf and iat when
// Config.Leeway is zero.
const DefaultLeeway = 30 * time.Second

// signingAlgs are the algorithms a JWT access token may be signed with:
// asymmetric ones only (RFC 9068 §4, RFC 8725 §3.1). "none" and the HMAC
// family are refused when the token is parsed, before any key is chosen,
// so a token "signed" with the issuer's public key as an HMAC secret
// never reaches a verification.
var signingAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// jwtVerifier checks JWT access tokens of one issuer against its key set
// (RFC 9068 §4): signature, iss, aud, exp/nbf/iat with leeway.
type jwtVerifier struct {
	issuer   string
	audience jwt.Audience
	leeway   time.Duration
	keys     *keySet
	now      func() time.Time
}

// accessClaims are the claims of an access token beyond the registered
// ones (RFC 9068 §2.2; RFC 8693 §4.2 for scope; scp as Microsoft Entra ID
// and Okta write it).
type accessClaims struct {
	ClientID string          `json:"client_id"`
	AZP      string          `json:"azp"`
	Scope    string          `json:"scope"`
	SCP      json.RawMessage `json:"scp"`
}

func (v *jwtVerifier) verify(ctx context.Context, token string) (Token, error) {
	tok, err := jwt.ParseSigned(token, signingAlgs)
	if err != nil {
		return Token{}, fmt.Errorf("%w: not a JWS-signed JWT with an asymmetric algorithm: %v", ErrInvalidToken, err)
	}
	if len(tok.Headers) != 1 {
		return Token{}, fmt.Errorf("%w: %d signatures, want one", ErrInvalidToken, len(tok.Headers))
	}
	hdr := tok.Headers[0]
	keys, err := v.keys.lookup(ctx, hdr.KeyID, hdr.Algorithm)
	if err != nil {
		return Token{}, err
	}
	var std jwt.Claims
	var extra accessClaims
	verified := false
	for _, k := range keys {
		if err = tok.Claims(k.Key, &std, &extra); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Token{}, fmt.Errorf("%w: signature does not verify with the issuer's key %q: %v", ErrInvalidToken, hdr.KeyID, err)
	}
	if std.Expiry == nil {
		return Token{}, fmt.Errorf("%w: no exp (RFC 9068 §2.2 requires one)", ErrInvalidToken)
	}
	now := v.now()
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: v.audience, Time: now}, v.leeway); err != nil {
		return Token{}, fmt.Errorf("%w: %s", ErrInvalidToken, claimProblem(err, std, v))
	}
	client := extra.ClientID
	if client == "" {
		client = extra.AZP
	}
	if std.Subject == "" && client == "" {
		// RFC 9068 §2.2 requires sub and client_id; without either the
		// token names no one, and every such token would be one principal.
		return Token{}, fmt.Errorf("%w: neither sub nor client_id (RFC 9068 §2.2 requires both)", ErrInvalidToken)
	}
	return Token{
		Principal: Principal{Issuer: std.Issuer, Subject: std.Subject, ClientID: client},
		Scopes:    scopes(extra.Scope, extra.SCP),
		Expiry:    std.Expiry.Time(),
	}, nil
}

// claimProblem says which claim failed, naming what was expected (claims
// are not secret; the token is never logged).
func claimProblem(err error, c jwt.Claims, v *jwtVerifier) string {
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return fmt.Sprintf("expired at %s", c.Expiry.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrNotValidYet):
		return fmt.Sprintf("not valid before %s", c.NotBefore.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return "issued in the future"
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return fmt.Sprintf("issuer %q, want %q", c.Issuer, v.issuer)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return fmt.Sprintf("audience %q, want one of %q", []string(c.Audience), []string(v.audience))
	}
	return err.Error()
}

// scopes reads the granted scopes: a space-separated scope string, or scp
// as a string or an array of strings.
func scopes(scope string, scp json.RawMessage) []string {
	out := strings.Fields(scope)
	if len(scp) == 0 {
		return out
	}
	var list []string
	if json.Unmarshal(scp, &list) == nil {
		return append(out, list...)
	}
	var one string
	if json.Unmarshal(scp, &one) == nil {
		out = append(out, strings.Fields(one)...)
	}
	return out
}
