package taskstore

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestWebhookEndpoints: the endpoints with a due delivery or a dead
// letter are found (the console lists them), an emptied queue is not,
// nor another prefix's, and limit bounds the answer.
func TestWebhookEndpoints(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		other := e.store(t, func(o *Options) { o.Prefix = "other" })
		a, b := uuid.NewString(), uuid.NewString()
		mustEnqueue(t, s, "chat.ops", a, 1)
		mustEnqueue(t, s, "ci", b, 1)
		mustEnqueue(t, s, "gone", b, 1)
		mustEnqueue(t, other, "elsewhere", a, 1)
		claimIDs(t, s, "ci", time.Minute)
		wantErr(t, s.DeliveryDead(ctx, "ci", evtID(b, 1), "HTTP 500"), nil) // dead only
		claimIDs(t, s, "gone", time.Minute)
		wantErr(t, s.DeliveryDone(ctx, "gone", evtID(b, 1)), nil) // nothing left
		names, err := s.WebhookEndpoints(ctx, 10)
		wantErr(t, err, nil)
		if want := []string{"chat.ops", "ci"}; !slices.Equal(names, want) {
			t.Fatalf("WebhookEndpoints = %v, want %v", names, want)
		}
		if names, err := s.WebhookEndpoints(ctx, 1); err != nil || len(names) != 1 {
			t.Fatalf("WebhookEndpoints(limit 1) = %v, %v", names, err)
		}
	})
}
