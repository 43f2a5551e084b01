package front2026

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/front"
	"github.com/taskgate/taskgate/gateway/internal/native"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// store is what the 2026-07-28 front needs of the task store.
type store interface {
	front.RenderStore // Get, Stamp, Options
	AnswerInputs(ctx context.Context, owner, id string, responses map[string]json.RawMessage) (int, error)
	RequestCancel(ctx context.Context, owner, id, message string) (*taskstore.Task, error)
	Watch(ctx context.Context, owner, id string) (*taskstore.Watch, error)
	WaitFor(ctx context.Context, owner, id string, cond func(*taskstore.Task) bool) (*taskstore.Task, error)
	ReserveAnonymous(ctx context.Context, id, addr string, expiry time.Time, max, perAddr int) error
	ReleaseAnonymous(ctx context.Context, id, addr string) error
	SharedSecret(ctx context.Context, name string) ([]byte, error)
	native.Store
}

// Front serves 2026-07-28 clients.
type Front struct {
	front.Deps
	store     store
	anonymous core.AnonymousTasks // the bounds of tasks of clients without Authorization
	life      context.Context     // ends when the gateway closes: listen streams end
	listens   *streamCounter      // subscriptions/listen streams open per owner
	// secret signs the requestState of MRTR rounds before a task
	// (mrtr.go); mrtrHoldFor is Config.MRTRHold.
	secret      mrtrSecret
	mrtrHoldFor time.Duration
}

// New returns the 2026-07-28 front: deps are the components it calls,
// store its task store, anonymous the bounds of tasks of clients without
// Authorization (Config.Anonymous), life ends when the gateway closes
// (listen streams end), mrtrHold is Config.MRTRHold.
func New(deps front.Deps, store store, anonymous core.AnonymousTasks, life context.Context, mrtrHold time.Duration) *Front {
	return &Front{Deps: deps, store: store, anonymous: anonymous, life: life,
		listens: newStreamCounter(maxListensPerSubscriber), mrtrHoldFor: mrtrHold}
}

// statelessReq is a validated 2026-07-28 request (SEP-2575 per-request
// _meta).
type statelessReq struct {
	Version    string          // _meta protocolVersion
	ClientCaps json.RawMessage // _meta clientCapabilities, verbatim
	Tasks      bool            // clientCapabilities.extensions declares the tasks extension
}

// declaresTasks reports whether the client declared the tasks extension
// (false for no request).
func (mr *statelessReq) declaresTasks() bool { return mr != nil && mr.Tasks }

// forward relays a 2026-07-28 request the gateway does not handle itself
// to the upstream by era and writes the answer back in the 2026-07-28
// shape; learn names a tools/call whose latency is learned. If a
// stateless upstream refuses it the way a session server would, the era
// is probed again and the request sent by the new era, once.
func (f *Front) forward(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, mr *statelessReq, learn string) {
	for recheck := true; ; recheck = false {
		era, err := f.Up.Era(r.Context(), core.ForwardedAuth(r))
		switch {
		case err != nil:
			f.Up.StatelessFailure(w, r, msg, err)
			return
		case era.Stateless:
			if f.Up.ForwardToStateless(w, r, msg, mr.declaresTasks(), era, recheck, learn) {
				return
			}
			continue
		}
		target, err := f.Up.Target(r.Context(), core.SessionOwner(r), core.ForwardedAuth(r), mr.Version)
		if err != nil {
			f.Up.StatelessFailure(w, r, msg, err)
			return
		}
		if msg.MethodName() == "tools/call" {
			f.bridgedCall(w, r, msg, mr, target, learn) // input becomes MRTR rounds (bridge.go)
			return
		}
		f.Up.ForwardToSession(w, r, msg, target, mr.Version)
		return
	}
}
