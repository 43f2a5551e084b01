package gwtest

import (
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape GETs url (a /metrics endpoint) and parses the exposition.
func Scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: HTTP %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not the text exposition format: %v", err)
	}
	return fams
}

// MetricValue is the counter, gauge or histogram count of the series of
// family name whose labels include want; -1 when there is none.
func MetricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// WaitMetric polls the /metrics endpoint url until name{want} equals v.
func WaitMetric(t testing.TB, url, name string, want map[string]string, v float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := MetricValue(Scrape(t, url), name, want)
		if got == v {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v, want %v", name, want, got, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
