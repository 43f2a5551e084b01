package front2026

import (
	"net/http"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
)

func TestMRTRStateSignature(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Now()
	st := mrtrState{Task: "t1", Tool: "x", Wait: 1000, Round: 1, Keys: []string{"a"}, Exp: now.Add(time.Minute).UnixMilli()}
	s := encodeState(key, "auth:a", st)
	if got, owner, ok := decodeState(key, "auth:a", s, now); !ok || owner != "auth:a" || got.Task != "t1" || got.Keys[0] != "a" {
		t.Errorf("round trip: %+v %q %v", got, owner, ok)
	}
	if _, _, ok := decodeState(key, "auth:b", s, now); ok {
		t.Error("another owner's state accepted")
	}
	if _, _, ok := decodeState(key, "auth:a", s, now.Add(2*time.Minute)); ok {
		t.Error("an expired state accepted")
	}
	if _, _, ok := decodeState([]byte("another key of thirty-two bytes!"), "auth:a", s, now); ok {
		t.Error("a state of another deployment accepted")
	}
	anon := encodeState(key, core.AnonOwner("t1"), st)
	if _, owner, ok := decodeState(key, "", anon, now); !ok || owner != core.AnonOwner("t1") {
		t.Errorf("anonymous: %q %v", owner, ok)
	}
	_ = http.StatusOK
}
