package webhook

import (
	"context"
	"fmt"

	"github.com/taskgate/taskgate/taskstore"
)

// What the console's deliveries page needs: per endpoint its queue's
// size and its dead letters, and a retry of one.

// EndpointStats is one endpoint's queue as the console shows it.
type EndpointStats struct {
	Endpoint Endpoint // Secrets included: never render them
	Due      int64    // deliveries waiting (due now or at a retry time)
	Dead     int64    // dead letters kept
}

// Stats are the queues of the endpoints in force, in configured order.
func (d *Dispatcher) Stats(ctx context.Context) ([]EndpointStats, error) {
	eps := d.Endpoints()
	out := make([]EndpointStats, 0, len(eps))
	for _, e := range eps {
		due, dead, err := d.cfg.Store.WebhookQueueStats(ctx, e.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, EndpointStats{Endpoint: e, Due: due, Dead: dead})
	}
	return out, nil
}

// DeadLetters are endpoint's newest dead deliveries, at most limit.
func (d *Dispatcher) DeadLetters(ctx context.Context, endpoint string, limit int) ([]taskstore.Delivery, error) {
	return d.cfg.Store.DeadDeliveries(ctx, endpoint, limit)
}

// RetryDead puts a dead delivery back in its endpoint's queue, due now,
// with a fresh retry window (the operator asked).
func (d *Dispatcher) RetryDead(ctx context.Context, endpoint, eventID string) error {
	if !d.known(endpoint) {
		return fmt.Errorf("no endpoint %q is configured", endpoint)
	}
	if err := d.cfg.Store.RetryDead(ctx, endpoint, eventID); err != nil {
		return err
	}
	d.wakeEndpoint(endpoint)
	return nil
}

func (d *Dispatcher) known(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.endpoints[name]
	return ok
}
