package webhook

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a Dispatcher's Prometheus collectors:
//
//	taskgate_webhook_deliveries_total{endpoint,event,outcome}  attempts: delivered|retried|dead
//	taskgate_webhook_delivery_seconds{endpoint}                one POST, sent to answer read
//	taskgate_webhook_endpoint_open{endpoint}                   1 while the endpoint's breaker is open
//
// Each replica counts the attempts it made.
type Metrics struct {
	deliveries *prometheus.CounterVec
	seconds    *prometheus.HistogramVec
	open       *prometheus.GaugeVec
}

func newMetrics() *Metrics {
	return &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_webhook_deliveries_total",
			Help: "Webhook delivery attempts this replica made, per endpoint, event type and outcome: delivered (2xx), retried (a later attempt is due) or dead (the retry window is spent; kept as a dead letter).",
		}, []string{"endpoint", "event", "outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "taskgate_webhook_delivery_seconds", Help: "Time of one webhook POST, from sending to the answer read (or the failure), per endpoint.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"endpoint"}),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "taskgate_webhook_endpoint_open",
			Help: "1 while this replica's circuit breaker for the endpoint is open (its POSTs failed repeatedly: one probe delivery at a time until one succeeds), else 0.",
		}, []string{"endpoint"}),
	}
}

// Collectors are what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.deliveries, m.seconds, m.open}
}

// prepare makes an endpoint's series exist at 0, so a rate is defined
// before its first failure.
func (m *Metrics) prepare(endpoint string) {
	m.open.WithLabelValues(endpoint)
	for _, ev := range Events {
		for _, o := range []string{"delivered", "retried", "dead"} {
			m.deliveries.WithLabelValues(endpoint, ev, o)
		}
	}
}
