package lockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lockgen/lockgen/internal/redistest"
	lockotel "github.com/lockgen/lockgen/otel"
	"github.com/lockgen/lockgen/runtime"
)

type env struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	c      *runtime.Client
}

func setup(t *testing.T, holdSpans bool) *env {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	obs, err := lockotel.New(lockotel.Options{
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		HoldSpans:      holdSpans,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := redistest.Start(t)
	c, err := runtime.NewClient(s.Client(t), &runtime.Options{Observer: obs, WatchdogTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &env{reader: reader, spans: spans, c: c}
}

func (e *env) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := e.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/lockgen/lockgen/otel" {
			t.Fatalf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func attrs(kv ...string) attribute.Set {
	var list []attribute.KeyValue
	for i := 0; i < len(kv); i += 2 {
		list = append(list, attribute.String(kv[i], kv[i+1]))
	}
	return attribute.NewSet(list...)
}

// sum is the value of a counter's point with exactly these attributes.
func sum(t *testing.T, m metricdata.Metrics, set attribute.Set) int64 {
	t.Helper()
	for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if p.Attributes.Equals(&set) {
			return p.Value
		}
	}
	return 0
}

// hist is a histogram's point with exactly these attributes.
func hist(t *testing.T, m metricdata.Metrics, set attribute.Set) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		if p.Attributes.Equals(&set) {
			return p
		}
	}
	t.Fatalf("%s has no point %v", m.Name, set.ToSlice())
	return metricdata.HistogramDataPoint[float64]{}
}

func TestObserverRecordsWaitsHoldsFailuresAndLosses(t *testing.T) {
	e := setup(t, false)
	ctx := context.Background()
	m := e.c.Mutex("order:1", runtime.LockOptions{Name: "OrderLock"})
	hctx, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	// Busy: a try-once fails, a waiting one gives up when its ctx ends.
	if _, err := m.TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := m.TryLock(cctx, runtime.Forever, runtime.Watchdog); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond) // a watchdog round renews the hold
	if err := m.Unlock(hctx); err != nil {
		t.Fatal(err)
	}
	// A hold ended by ForceUnlock is lost.
	if _, err := m.TryLock(ctx, 0, runtime.Watchdog); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ForceUnlock(ctx); err != nil {
		t.Fatal(err)
	}

	ms := e.metrics(t)
	lock := attrs("lock.name", "OrderLock", "lock.kind", "reentrant")
	for name, unit := range map[string]string{
		"lockgen.lock.wait.duration": "s", "lockgen.lock.hold.duration": "s",
		"lockgen.lock.acquisitions": "{acquisition}", "lockgen.lock.waits": "{wait}",
		"lockgen.lock.failures": "{failure}", "lockgen.lock.losses": "{loss}",
		"lockgen.watchdog.rounds": "{round}", "lockgen.watchdog.round.duration": "s",
		"lockgen.watchdog.renewals": "{renewal}",
	} {
		if ms[name].Unit != unit {
			t.Errorf("%s: unit %q, want %q", name, ms[name].Unit, unit)
		}
	}
	if n := sum(t, ms["lockgen.lock.acquisitions"], lock); n != 2 {
		t.Errorf("acquisitions %d, want 2", n)
	}
	if n := sum(t, ms["lockgen.lock.waits"], lock); n != 1 {
		t.Errorf("waits %d, want 1 (the try-once does not wait)", n)
	}
	for outcome, want := range map[string]int64{"not_acquired": 1, "ctx_done": 1} {
		set := attrs("lock.name", "OrderLock", "lock.kind", "reentrant", "lock.outcome", outcome)
		if n := sum(t, ms["lockgen.lock.failures"], set); n != want {
			t.Errorf("failures %s: %d, want %d", outcome, n, want)
		}
	}
	if n := sum(t, ms["lockgen.lock.losses"], lock); n != 1 {
		t.Errorf("losses %d, want 1", n)
	}
	held := hist(t, ms["lockgen.lock.hold.duration"], lock)
	if held.Count != 1 || held.Sum < 0.25 {
		t.Errorf("hold duration: %d holds, %.3fs in all; want 1 of ≥ 0.25s", held.Count, held.Sum)
	}
	waited := hist(t, ms["lockgen.lock.wait.duration"], attrs("lock.name", "OrderLock", "lock.kind", "reentrant", "lock.outcome", "ctx_done"))
	if waited.Count != 1 || waited.Sum < 0.04 {
		t.Errorf("wait until ctx done: %d, %.3fs; want 1 of ≥ 0.04s", waited.Count, waited.Sum)
	}
	if n := sum(t, ms["lockgen.watchdog.rounds"], attrs("lock.outcome", "ok")); n < 1 {
		t.Errorf("watchdog rounds %d, want ≥ 1", n)
	}
	renewals := ms["lockgen.watchdog.renewals"].Data.(metricdata.Histogram[float64]).DataPoints
	if len(renewals) != 1 || renewals[0].Sum < 1 {
		t.Errorf("renewals per round %+v, want ≥ 1 renewal recorded", renewals)
	}
}

func TestObserverTracesAttemptsAndHoldsUnderTheCallersSpan(t *testing.T) {
	e := setup(t, true)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "checkout")
	m := e.c.FairLock("inventory:a", runtime.LockOptions{Name: "InventoryLock"})
	if err := m.Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	hctx, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(context.Background(), 0, runtime.Watchdog); err == nil {
		t.Fatal("taken twice")
	}
	if _, err := m.ForceUnlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-hctx.Done()
	parent.End()

	var acquires, holds []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		switch s.Name() {
		case "lockgen.acquire":
			acquires = append(acquires, s)
		case "lockgen.hold":
			holds = append(holds, s)
		}
	}
	if len(acquires) != 3 || len(holds) != 2 {
		t.Fatalf("%d acquire and %d hold spans, want 3 and 2", len(acquires), len(holds))
	}
	for _, s := range append([]sdktrace.ReadOnlySpan{acquires[0], acquires[1]}, holds...) {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s is not under the caller's span", s.Name())
		}
	}
	want := attrs("lock.name", "InventoryLock", "lock.kind", "fair", "lock.key", "inventory:a", "lock.outcome", "acquired")
	if got := attribute.NewSet(acquires[0].Attributes()...); !got.Equals(&want) {
		t.Errorf("acquire span attributes %v, want %v", got.ToSlice(), want.ToSlice())
	}
	if failed := acquires[2]; failed.Status().Code != codes.Error || failed.Parent().IsValid() {
		t.Errorf("failed attempt: status %v, parent %v; want an error, no parent", failed.Status(), failed.Parent())
	}
	lost := holds[1]
	if lost.Status().Code != codes.Error || len(lost.Events()) != 1 || lost.Events()[0].Name != "lockgen.lock_lost" {
		t.Errorf("lost hold span: status %v, events %v; want an error with a lockgen.lock_lost event", lost.Status(), lost.Events())
	}
	if holds[0].Status().Code == codes.Error {
		t.Errorf("released hold span has status %v", holds[0].Status())
	}
}

// An owner holds both sides of a read-write lock after a downgrade (the
// write hold, then a read hold under it): the write side's release ends the
// write hold's span, not the read one's. Spans were paired by key and owner
// alone.
func TestADowngradedWriteReleaseEndsTheWriteHoldSpan(t *testing.T) {
	e := setup(t, true)
	ctx := context.Background()
	rw := e.c.ReadWrite("otel:rw", runtime.LockOptions{Name: "Doc"})
	wctx, err := rw.Write().TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	rctx, err := rw.Read().TryLock(wctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.Write().Unlock(wctx); err != nil {
		t.Fatal(err)
	}
	var ended []string
	for _, s := range e.spans.Ended() {
		if s.Name() == "lockgen.hold" {
			for _, a := range s.Attributes() {
				if a.Key == "lock.kind" {
					ended = append(ended, a.Value.AsString())
				}
			}
		}
	}
	if len(ended) != 1 || ended[0] != "write" {
		t.Fatalf("hold spans ended by the write side's release: %v, want [write]", ended)
	}
	if err := rw.Read().Unlock(rctx); err != nil {
		t.Fatal(err)
	}
}

func TestOutcomeClassifiesEveryFailure(t *testing.T) {
	for err, want := range map[error]string{
		nil:                      "acquired",
		runtime.ErrNotAcquired:   "not_acquired",
		context.Canceled:         "ctx_done",
		context.DeadlineExceeded: "ctx_done",
		runtime.ErrQuorum:        "quorum",
		runtime.ErrClosed:        "closed",
		runtime.ErrUpgrade:       "error",
	} {
		if got := lockotel.Outcome(&runtime.LockError{Op: "acquire", Err: err}); err != nil && got != want {
			t.Errorf("Outcome(%v) = %q, want %q", err, got, want)
		}
	}
	if got := lockotel.Outcome(nil); got != "acquired" {
		t.Errorf("Outcome(nil) = %q", got)
	}
}
