package runner

import "time"

// Figures is what the runner holds now, for the operator's console
// (gateway's Handler.Status): read under the runner's own locks, so it is
// safe for concurrent use and cheap.
// Exported as the result of Runner.Figures, whose fields gateway's Status reads.
type Figures struct {
	Held      int       // in-flight calls, plus slots reserved for calls about to start
	Leases    int       // tasks whose leases this replica's workers renew
	LastSweep time.Time // when the recoverer last reached the store; zero before its first sweep
}

// Figures returns the runner's figures now.
func (rn *Runner) Figures() Figures {
	rn.mu.Lock()
	f := Figures{Held: rn.adm.calls}
	rn.mu.Unlock()
	rn.leases.Mu.Lock()
	f.Leases = len(rn.leases.runs)
	rn.leases.Mu.Unlock()
	if ms := rn.recoverer.lastOK.Load(); ms > 0 {
		f.LastSweep = time.UnixMilli(ms)
	}
	return f
}
