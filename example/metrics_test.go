package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestDemoWithMetricsPrintsAHistogramPerLockAndStillEndsWithTheViolations(t *testing.T) {
	var out bytes.Buffer
	obs := newLatencies()
	if err := runObserved(&out, "", nil, 4, 1500*time.Millisecond, obs); err != nil { // long enough under -race on a loaded box for every lock to be taken
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	for _, lock := range []string{"OrderLock", "InventoryLock", "Catalog", "CheckoutLock", "PaymentLock", "TenantReportLock"} {
		if !strings.Contains(text, "  "+lock+" ") {
			t.Errorf("no histogram line for %s:\n%s", lock, text)
		}
	}
	if !strings.Contains(text, "acquire latency per lock") || !strings.Contains(text, "p99 ") {
		t.Errorf("no latency section:\n%s", text)
	}
	if !strings.HasSuffix(strings.TrimSpace(text), "violations found: 0") {
		t.Errorf("the demo does not end with its violations:\n%s", text)
	}
}
