package lockotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockgen/lockgen/runtime"
)

// instrumentation is the scope name of the meter and the tracer.
const instrumentation = "github.com/lockgen/lockgen/otel"

// Attribute keys.
const (
	AttrName    = attribute.Key("lock.name")
	AttrKind    = attribute.Key("lock.kind")
	AttrOutcome = attribute.Key("lock.outcome")
	AttrKey     = attribute.Key("lock.key")
)

// Outcomes, the values of lock.outcome.
const (
	OutcomeAcquired    = "acquired"
	OutcomeNotAcquired = "not_acquired"
	OutcomeCtxDone     = "ctx_done"
	OutcomeQuorum      = "quorum"
	OutcomeClosed      = "closed"
	OutcomeError       = "error"
	OutcomeOK          = "ok" // watchdog rounds
)

// Options configures an Observer. The zero value uses the global providers
// and records no hold spans.
type Options struct {
	MeterProvider  metric.MeterProvider // nil: otel.GetMeterProvider()
	TracerProvider trace.TracerProvider // nil: otel.GetTracerProvider()
	// HoldSpans records a span per hold, from acquisition to release.
	HoldSpans bool
}

// Observer is a runtime.Observer that records metrics and spans. It is
// safe for concurrent use.
type Observer struct {
	tracer    trace.Tracer
	holdSpans bool

	wait, hold, roundTime, renewals           metric.Float64Histogram
	acquired, waits, failures, losses, rounds metric.Int64Counter

	mu    sync.Mutex
	holds map[holdID][]trace.Span // open hold spans, innermost last
}

type holdID struct{ key, owner, lock string } // lock: a downgrade holds both sides of one key

var _ runtime.Observer = (*Observer)(nil)

// New returns an Observer recording through the providers of opts.
func New(opts Options) (*Observer, error) {
	mp, tp := opts.MeterProvider, opts.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(instrumentation)
	o := &Observer{tracer: tp.Tracer(instrumentation), holdSpans: opts.HoldSpans, holds: map[holdID][]trace.Span{}}
	secs := metric.WithExplicitBucketBoundaries(0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
	var errs []error
	hist := func(name, unit, desc string, opts ...metric.Float64HistogramOption) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, append(opts, metric.WithUnit(unit), metric.WithDescription(desc))...)
		errs = append(errs, err)
		return h
	}
	count := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	o.wait = hist("lockgen.lock.wait.duration", "s", "Time from an acquisition's call to its hold or failure.", secs)
	o.hold = hist("lockgen.lock.hold.duration", "s", "Time from a hold's acquisition to its release.", secs)
	o.acquired = count("lockgen.lock.acquisitions", "{acquisition}", "Holds taken.")
	o.waits = count("lockgen.lock.waits", "{wait}", "Acquisitions that found the lock taken and waited for it.")
	o.failures = count("lockgen.lock.failures", "{failure}", "Acquisitions given up, by outcome.")
	o.losses = count("lockgen.lock.losses", "{loss}", "Holds lost before their release.")
	o.rounds = count("lockgen.watchdog.rounds", "{round}", "Watchdog renewal calls, by outcome.")
	o.roundTime = hist("lockgen.watchdog.round.duration", "s", "Time of one watchdog renewal call.", secs)
	o.renewals = hist("lockgen.watchdog.renewals", "{renewal}", "Holds renewed by one watchdog call.",
		metric.WithExplicitBucketBoundaries(0, 1, 10, 50, 100, 500, 1000))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

// Outcome classifies an acquisition's error as a lock.outcome value.
func Outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeAcquired
	case errors.Is(err, runtime.ErrNotAcquired):
		return OutcomeNotAcquired
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCtxDone
	case errors.Is(err, runtime.ErrQuorum):
		return OutcomeQuorum
	case errors.Is(err, runtime.ErrClosed):
		return OutcomeClosed
	}
	return OutcomeError
}

// ObserveLock records e.
func (o *Observer) ObserveLock(e runtime.Event) {
	ctx := e.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	lock := metric.WithAttributes(AttrName.String(e.Name), AttrKind.String(e.Lock))
	switch e.Kind {
	case runtime.EventWaitStarted:
		o.waits.Add(ctx, 1, lock)
	case runtime.EventAcquired, runtime.EventAcquireFailed:
		outcome := Outcome(e.Err)
		o.wait.Record(ctx, e.Wait.Seconds(), metric.WithAttributes(AttrName.String(e.Name), AttrKind.String(e.Lock), AttrOutcome.String(outcome)))
		if e.Kind == runtime.EventAcquired {
			o.acquired.Add(ctx, 1, lock)
		} else {
			o.failures.Add(ctx, 1, metric.WithAttributes(AttrName.String(e.Name), AttrKind.String(e.Lock), AttrOutcome.String(outcome)))
		}
		o.acquireSpan(ctx, e, outcome)
	case runtime.EventReleased:
		o.hold.Record(ctx, e.Held.Seconds(), lock)
		o.endHold(e, nil)
	case runtime.EventLost:
		o.losses.Add(ctx, 1, lock)
		o.endHold(e, e.Err)
	case runtime.EventRenewed:
		outcome := OutcomeOK
		if e.Err != nil {
			outcome = OutcomeError
		}
		o.rounds.Add(ctx, 1, metric.WithAttributes(AttrOutcome.String(outcome)))
		o.roundTime.Record(ctx, e.Took.Seconds())
		o.renewals.Record(ctx, float64(e.Renewed))
	}
}

// acquireSpan records the acquisition that just ended as a span that
// started when it was called, and opens its hold span.
func (o *Observer) acquireSpan(ctx context.Context, e runtime.Event, outcome string) {
	now := time.Now()
	attrs := trace.WithAttributes(AttrName.String(e.Name), AttrKind.String(e.Lock), AttrKey.String(e.Key), AttrOutcome.String(outcome))
	_, span := o.tracer.Start(ctx, "lockgen.acquire", attrs, trace.WithTimestamp(now.Add(-e.Wait)), trace.WithSpanKind(trace.SpanKindInternal))
	if e.Err != nil {
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, outcome)
	}
	span.End(trace.WithTimestamp(now))
	if !o.holdSpans || e.Err != nil {
		return
	}
	_, hold := o.tracer.Start(ctx, "lockgen.hold", trace.WithTimestamp(now),
		trace.WithAttributes(AttrName.String(e.Name), AttrKind.String(e.Lock), AttrKey.String(e.Key)))
	id := holdID{e.Key, e.Owner, e.Lock}
	o.mu.Lock()
	o.holds[id] = append(o.holds[id], hold)
	o.mu.Unlock()
}

// endHold ends the innermost hold span of e's owner on e's key (a
// release), or every one of them (a loss: the holds of an owner on a key
// are lost together).
func (o *Observer) endHold(e runtime.Event, lost error) {
	if !o.holdSpans {
		return
	}
	id := holdID{e.Key, e.Owner, e.Lock}
	o.mu.Lock()
	spans := o.holds[id]
	var end []trace.Span
	switch {
	case len(spans) == 0:
	case lost != nil:
		end = spans
		delete(o.holds, id)
	default:
		end = spans[len(spans)-1:]
		if len(spans) == 1 {
			delete(o.holds, id)
		} else {
			o.holds[id] = spans[:len(spans)-1]
		}
	}
	o.mu.Unlock()
	for _, s := range end {
		if lost != nil {
			s.AddEvent("lockgen.lock_lost", trace.WithAttributes(attribute.String("error", lost.Error())))
			s.SetStatus(codes.Error, "lock lost")
		}
		s.End()
	}
}
