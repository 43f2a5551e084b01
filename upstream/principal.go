package upstream

import "context"

// Principal is who a request to the upstream is made for, as the gateway
// counts fair shares (docs/operations.md, "Fair shares"): a local server's
// bridge (upstream/stdio, upstream/sse), reached in process with the
// request's context, bounds the sessions of each principal with it. The
// gateway sets it on each MCP request's context; this package reads
// nothing of it, it only carries it, so that the bridges need not import
// the gateway.
type Principal struct {
	// Key names the principal: its credentials' owner, else its client
	// address. Empty: unknown (the bridge then counts no share).
	Key string
	// Refused, when set, hears of each refusal a bridge made for the
	// principal, by reason (the gateway's taskgate_refusals_total and its
	// sampled log), with the refusal's message.
	Refused func(reason, msg string)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom is the principal ctx carries; the zero Principal if none.
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}
