package core

import (
	"strings"
	"testing"
)

// TestLogOwnerAnonymous: both kinds of anonymous owner read "anonymous:"
// in the log (they used to read "anonymous:" and "anon:"), with digests
// that still tell them apart; credentials never show.
func TestLogOwnerAnonymous(t *testing.T) {
	shared, task := LogOwner(AnonymousOwner), LogOwner(AnonOwner("t-1"))
	if !strings.HasPrefix(shared, "anonymous:") || !strings.HasPrefix(task, "anonymous:") || shared == task {
		t.Errorf("logOwner = %q and %q, want both anonymous: with distinct digests", shared, task)
	}
	if got := LogOwner("auth:secretdigest"); !strings.HasPrefix(got, "auth:") || strings.Contains(got, "secret") {
		t.Errorf("LogOwner(auth) = %q", got)
	}
}
