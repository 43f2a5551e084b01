// Package identity is who a request to the gateway is and what the
// gateway is called: its public URL, OAuth discovery on its origin, the
// auth guard of the MCP endpoint (gateway.Config.Auth), the principals'
// freshest tokens for the requests made later on a task's behalf, and the
// sessions bound to the principal that opened them (docs/ARCHITECTURE.md
// invariant 11). The Handler (package gateway) builds each part in New and
// calls it as it routes a request; no part routes anything itself.
//
//	request ─▶ PublicURLs.Resolve ─▶ front door (DropForwarding)
//	        ─▶ AuthGuard.Authenticate ─▶ Credentials.Note
//	        ─▶ SessionGuard.Allows (and BindInitialize on initialize)
//	any other path ─▶ OAuthMeta.Serve (the well-known documents, the
//	                  authorization server's endpoints)
//	a 401 or 403 answer ─▶ PointChallenges (at the gateway's metadata)
//
// Its files:
//
//   - publicurl.go: PublicURLs (NewPublicURLs, Resolve, MCPURL,
//     MetadataURL), the gateway's public URL for a request, from
//     Config.PublicURL or the request and a trusted proxy's forwarding
//     headers (RFC 7239, X-Forwarded-*); ParsePublicURL;
//     DropForwarding, a client's own forwarding headers deleted.
//   - oauthmeta.go: OAuthMeta (NewOAuthMeta, Serve), the protected
//     resource metadata (RFC 9728) and the pass-through of the upstream's
//     authorization server metadata (RFC 8414, OpenID Connect Discovery)
//     and endpoints, cached; PointChallenges, an upstream's
//     WWW-Authenticate pointed at the gateway's metadata.
//   - auth.go: Authenticator (gateway.Config.Auth's type); AuthGuard
//     (NewAuthGuard, Authenticate), a request's token checked and a
//     refusal answered (RFC 6750 §3 challenge, 503, 429).
//   - credentials.go: Credentials (NewCredentials, Note, Bind, Freshest,
//     KeyOf), the newest token of each principal's client, kept sealed in
//     the store for the other replicas; credentialStore, what it needs of
//     the store.
//   - sessionbind.go: SessionGuard (NewSessionGuard, Allows,
//     BindInitialize, Ended), sessions bound to their owners and every
//     request naming one checked; bindingStore, what it needs of the
//     store.
//
// It may import internal/upstreamside, internal/obs, internal/core, auth,
// upstream, taskstore and internal/mcpwire, and nothing above it: not
// package gateway, no front.
package identity
