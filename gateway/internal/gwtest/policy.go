package gwtest

import (
	"testing"
	"time"

	"github.com/taskgate/taskgate/policy"
)

// DirectWait is the hybrid wait for calls a test needs answered directly
// (or asking at once): long enough that no busy machine stretches a fast
// call past it. A call meant to become a task is held at a gate, or runs
// far longer than a short wait of its own (WithWait).
const DirectWait = time.Minute

// Rules builds rules from pairs of glob and mode.
func Rules(t testing.TB, specs ...any) policy.Rules {
	t.Helper()
	var rs policy.Rules
	for i := 0; i < len(specs); i += 2 {
		r, err := policy.NewRule(specs[i].(string), specs[i+1].(policy.Mode))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// WithWait returns rs with the hybrid wait wait on each rule (a rule's
// hybridWait: a task or auto rule's own budget).
func WithWait(rs policy.Rules, wait time.Duration) policy.Rules {
	out := make(policy.Rules, len(rs))
	for i, r := range rs {
		r.HybridWait = wait
		out[i] = r
	}
	return out
}

// RulesPolicy is a fixed policy of rules rs, the policy package's
// defaults for the rest.
func RulesPolicy(rs policy.Rules) *policy.Current {
	return policy.NewCurrent(&policy.Config{Rules: rs})
}

// HybridPolicy is RulesPolicy with a hybrid wait.
func HybridPolicy(rs policy.Rules, wait time.Duration) *policy.Current {
	return policy.NewCurrent(&policy.Config{Rules: rs, HybridWait: wait})
}
