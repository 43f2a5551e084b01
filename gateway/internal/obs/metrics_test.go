package obs

import (
	"fmt"
	"testing"
)

func TestMetricsToolLabelBounded(t *testing.T) {
	var l toolLabels
	for i := 0; i < maxToolLabels; i++ {
		if got := l.Label(fmt.Sprint("t", i)); got != fmt.Sprint("t", i) {
			t.Fatalf("label %d = %q", i, got)
		}
	}
	if got := l.Label("one-too-many"); got != "other" {
		t.Errorf("past the bound: %q, want other", got)
	}
	if got := l.Label("t7"); got != "t7" {
		t.Errorf("a known tool after the bound: %q", got)
	}
	if MethodLabel("made/up") != "other" || MethodLabel("notifications/x") != "notification" || MethodLabel("tools/call") != "tools/call" {
		t.Error("MethodLabel does not bound the method label")
	}
}
