// Package auth validates the bearer tokens a client presents to the
// gateway when it acts as an OAuth 2.1 resource server (MCP 2025-06-18,
// Authorization), and names the principal a valid token stands for.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
)

// Principal is who a validated token stands for. Issuer and Subject come
// from the token (its iss and sub claims, or the introspection answer);
// without a subject (client credentials, introspection without sub) the
// principal is the client, ClientID, at Issuer.
type Principal struct {
	// Issuer is the authorization server that issued the token: its iss,
	// or the introspection endpoint's URL when the answer names none.
	Issuer string
	// Subject is the token's sub; empty when it has none.
	Subject string
	// ClientID is the token's client_id (or azp), if any.
	ClientID string
}

// Key is the principal's stable identity: the same for every token the
// same user (or client, without a subject) is issued by the same issuer,
// so tasks and limits keyed by it outlive any one token. It is a digest,
// never a credential.
func (p Principal) Key() string {
	var id string
	if p.Subject != "" {
		id = "sub\x00" + p.Issuer + "\x00" + p.Subject
	} else {
		id = "client\x00" + p.Issuer + "\x00" + p.ClientID
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// ClientKey is the principal as one client: the same user signed in to
// two applications (client_id, or azp) is two of these. A token may stand
// in for another only within one ClientKey: an application's token
// carries the scopes and consent granted to that application (RFC 6749
// §3.3, RFC 9068 §2.2.3), not to the user's other ones. A digest.
func (p Principal) ClientKey() string {
	sum := sha256.Sum256([]byte(p.Key() + "\x00" + p.ClientID))
	return hex.EncodeToString(sum[:])
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p, the principal of the request.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext is the principal the request's token was validated for;
// false when no validation took place.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
