package upstreamside

// The upstream's era: a stateless 2026-07-28 server, or a session server
// (2025-11-25 and older).
//
// The era is a property of the upstream, not of a request (MCP 2026-07-28,
// Versioning, "Backward Compatibility"): the first 2026-07-28 request
// probes with server/discover at 2026-07-28 (SEP-2575, "Discovery for
// Server Capabilities"), and the answer is kept for the life of the
// process. A DiscoverResult listing 2026-07-28 means a stateless upstream;
// any other answer the upstream gives (a JSON-RPC error such as -32022
// without 2026-07-28, -32601, an HTTP 4xx without one) means a session
// Upstream. No answer (unreachable, 5xx, 401) decides nothing and is
// retried by the next request. When a later answer contradicts the era (a
// Stateless request refused the way a session server refuses, an
// initialize refused), the era is forgotten and probed again.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
)

// eraProbeTimeout bounds the server/discover probe.
const eraProbeTimeout = 10 * time.Second

// GatewayInfo is the Implementation the gateway names itself with upstream.
var GatewayInfo = json.RawMessage(`{"name":"taskgate","version":"1.0.0"}`)

// upstreamEra is what the probe learned.
type upstreamEra struct {
	Stateless bool
	versions  []string // a stateless upstream's supportedVersions
	// Tasks: a stateless upstream that declares the tasks extension: it
	// may answer any tools/call of a client that declares it with a task
	// of its own (internal/front2026/native.go).
	Tasks bool
}

// eraProbe knows the upstream's era once probed. The zero value is ready.
type eraProbe struct {
	mu        sync.Mutex
	Era       *upstreamEra  // nil until probed
	detecting chan struct{} // closed when the probe in flight ends
}

// Era returns the upstream's era, probing once per process (one probe at
// a time; concurrent callers wait for it). auth is sent with the probe,
// for upstreams that want credentials on every request.
func (u *Side) Era(ctx context.Context, auth http.Header) (*upstreamEra, error) {
	p := &u.probe
	for {
		p.mu.Lock()
		if p.Era != nil {
			era := p.Era
			p.mu.Unlock()
			return era, nil
		}
		if ch := p.detecting; ch != nil {
			p.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		p.detecting = ch
		p.mu.Unlock()

		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eraProbeTimeout)
		era, err := u.probeEra(pctx, auth)
		cancel()
		p.mu.Lock()
		if err == nil {
			p.Era = era
		}
		p.detecting = nil
		close(ch)
		p.mu.Unlock()
		if err != nil {
			u.log.Warn().Str("op", "era").Err(err).Msg("cannot tell the upstream's protocol era; will probe again")
			return nil, err
		}
		u.log.Info().Str("op", "era").Bool("stateless", era.Stateless).Bool("tasks_extension", era.Tasks).Strs("versions", era.versions).Msg("upstream era detected")
		return era, nil
	}
}

// ForgetEra drops the known era, if it is still the one the caller used
// (was; nil: whatever it is), so the next request probes again.
func (u *Side) ForgetEra(was *upstreamEra) {
	p := &u.probe
	p.mu.Lock()
	if p.Era == was || was == nil {
		p.Era = nil
	}
	p.mu.Unlock()
	u.log.Info().Str("op", "era").Msg("the upstream answered unlike its era; probing again")
}

// KnownEra is the era if probed, else nil. Exported for a test only:
// front2026's TestUpstreamEraRedetected watches it change behind a front.
func (u *Side) KnownEra() *upstreamEra {
	p := &u.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Era
}

// probeEra sends server/discover at 2026-07-28 and classifies the answer.
func (u *Side) probeEra(ctx context.Context, auth http.Header) (*upstreamEra, error) {
	params := mcpwire.MustMarshal(map[string]any{"_meta": map[string]any{
		core.MetaProtocolVersion: core.Version2026,
		core.MetaClientInfo:      GatewayInfo,
		core.MetaClientCaps:      map[string]any{},
	}})
	sess := &upstream.Session{ProtocolVersion: core.Version2026, Header: auth}
	resp, err := u.client.Call(ctx, sess, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "server/discover", Params: params}, upstream.CallOptions{})
	if err != nil {
		var se *upstream.StatusError
		if errors.As(err, &se) && refusesEra(se.Status) {
			return &upstreamEra{}, nil // a 4xx without a JSON-RPC error: not a stateless server
		}
		return nil, err
	}
	if resp.Error != nil {
		return &upstreamEra{}, nil
	}
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
		Capabilities      struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(resp.Result, &res) != nil || !slices.Contains(res.SupportedVersions, core.Version2026) {
		return &upstreamEra{}, nil
	}
	_, tasks := res.Capabilities.Extensions[core.TasksExtension]
	return &upstreamEra{Stateless: true, versions: res.SupportedVersions, Tasks: tasks}, nil
}

// refusesEra reports whether an HTTP status without a JSON-RPC body says
// "I do not speak this" (versus "not now" or "who are you").
func refusesEra(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return status >= 400 && status < 500
}

// version2024 is the oldest session protocol (MCP 2024-11-05), which many
// published servers still speak.
const version2024 = "2024-11-05"

// Frontable are the upstream versions presented as 2025-11-25 to a client
// that asks for it, so older servers gain tasks too. Their messages are a
// subset of 2025-11-25's for everything the gateway relays unchanged: what
// an older server cannot do (elicitation before 2025-06-18, structured
// output and MCP-Protocol-Version before 2025-06-18, audio content and
// tool annotations before 2025-03-26) it simply never sends. The session
// goes on at the upstream's version on the upstream side (the
// MCP-Protocol-Version header of each request rewritten to it,
// upstreamHeader).
var Frontable = map[string]bool{"2025-06-18": true, "2025-03-26": true, version2024: true}

// PresentsTasks reports whether 2025-11-25 clients get the gateway's tasks
// in front of a session upstream that chose version at initialize (its
// own, or one the gateway presents as 2025-11-25); any version for a
// Stateless upstream (2026-07-28), whose sessions the gateway holds.
func PresentsTasks(version string) bool {
	return version == "" || version >= core.Version2025 || Frontable[version]
}

// SupportedVersions are the versions the gateway serves, newest first:
// 2026-07-28 statelessly, and through initialize the session versions the
// Upstream takes (2025-11-25 at least, which the gateway presents in front
// of 2025-06-18 and 2025-03-26 upstreams too). extra adds versions known to
// work (the version of an owner session).
func (u *Side) SupportedVersions(extra ...string) []string {
	vs := []string{core.Version2026}
	era := u.KnownEra()
	switch {
	case era != nil && era.Stateless:
		for _, v := range era.versions {
			if v < core.Version2026 {
				vs = append(vs, v)
			}
			if Frontable[v] {
				vs = append(vs, core.Version2025)
			}
		}
	default:
		vs = append(vs, core.Version2025)
	}
	vs = append(vs, extra...)
	slices.Sort(vs)
	vs = slices.Compact(vs)
	slices.Reverse(vs)
	return vs
}
