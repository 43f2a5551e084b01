package stdio

// The fleet: the bridge's children as processes, apart from the sessions
// they serve. It starts and initializes them (cold, or from the warm
// pool: warm.go), keeps the principals' children (principal.go), gives a
// session a fresh child when its own dies under a call the gateway runs
// again (respawn.go), and watches their usage (budget.go). The Bridge
// holds one and asks it for children; the sessions, the call table and
// the replicas stay the Bridge's.

import (
	"encoding/json"
	"errors"
)

// fleet is the bridge's children; guarded by Bridge.mu.
type fleet struct {
	b *Bridge // the sessions a child serves, the limits, the bridge's mutex and stop

	procs []*proc // every running child, for Close and the usage watcher
	// principals are the principals' children here (PerPrincipal), by key.
	principals map[string]*principalChild
	warm       warmPool // children started ahead (warm.go)
	budget     *budget  // the usage watcher (budget.go); nil without /proc
}

// spawn starts a child and initializes it with params; sess is the
// session it is for (nil: the shared child), whose GET stream its first
// requests wait for. A child that started but failed its handshake is
// stopped and returned with the error.
func (f *fleet) spawn(params json.RawMessage, sess *session) (*proc, error) {
	p, err := f.startChild(sess)
	if err != nil {
		return p, err
	}
	return p, f.readyChild(p, params)
}

// startChild starts a child, not yet initialized, and counts it among the
// bridge's (Close stops it). A child started as the bridge closes is
// killed and returned with an error.
func (f *fleet) startChild(sess *session) (*proc, error) {
	b := f.b
	p, err := startProc(procOptions{argv: b.opts.Command, env: b.opts.Env, dir: b.opts.Dir,
		maxLine: b.opts.MaxMessage, log: b.log, dispatch: b.dispatch, answer: b.answerFile, failCall: b.failCall,
		sess: sess})
	if err != nil {
		return nil, err
	}
	f.budget.started(p) // its limits (budget.go)
	b.mu.Lock()
	if b.closed { // Close took its list of children already
		b.mu.Unlock()
		p.kill("the gateway shut down")
		<-p.exited
		return p, errors.New("the bridge is closed")
	}
	f.procs = append(f.procs, p)
	b.mu.Unlock()
	go func() { <-p.exited; b.forget(p) }()
	return p, nil
}

// readyChild initializes a started child with params; one that fails its
// handshake is stopped.
func (f *fleet) readyChild(p *proc, params json.RawMessage) error {
	b := f.b
	if err := p.handshake(params, b.opts.InitTimeout); err != nil {
		b.log.Error().Str("op", "stdio").Int("pid", p.cmd.Process.Pid).Err(err).Msg("upstream process failed its initialize; stopped")
		p.kill("its initialize failed")
		<-p.exited
		return err
	}
	b.log.Info().Str("op", "stdio").Int("pid", p.cmd.Process.Pid).Str("protocol_version", p.version).Msg("upstream process ready")
	return nil
}
