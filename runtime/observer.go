package runtime

import (
	"context"
	"errors"
	"time"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventAcquired: a hold was taken (Wait is the time spent acquiring).
	EventAcquired EventKind = iota + 1
	// EventAcquireFailed: an acquisition gave up (Err says why).
	EventAcquireFailed
	// EventReleased: a hold was released (Held is how long it was held).
	EventReleased
	// EventLost: a hold was lost (Err wraps ErrLockLost), or cut by
	// Shutdown before it was released (Err wraps ErrDraining).
	EventLost
	// EventRenewed: one watchdog renewal call finished (Renewed holds in
	// Calls script calls, Took from send to reply).
	EventRenewed
	// EventWaitStarted: an acquisition found the lock taken and starts
	// waiting for it (Wait is the time its first try took). It comes at
	// most once per acquisition, never for one that takes the lock at the
	// first try or that does not wait (a wait time of 0).
	EventWaitStarted
)

func (k EventKind) String() string {
	switch k {
	case EventAcquired:
		return "acquired"
	case EventAcquireFailed:
		return "acquire-failed"
	case EventReleased:
		return "released"
	case EventLost:
		return "lost"
	case EventRenewed:
		return "renewed"
	case EventWaitStarted:
		return "wait-started"
	}
	return "unknown"
}

// Event is what an Observer is told. Fields that do not apply to a Kind
// are zero. Building one allocates nothing: every field is a value the
// runtime already has.
type Event struct {
	Kind EventKind
	Name string // logical lock name (LockOptions.Name)
	Key  string // Redis key (a multi-lock's keys, comma-separated)
	// Lock is the lock's kind: "reentrant", "fair", "read" or "write" (the
	// sides of a read-write lock), "multi" or "red". Empty for EventRenewed.
	Lock string
	// Owner is the owner token of the hold (EventAcquired, EventReleased,
	// EventLost): it pairs a release or a loss with its acquisition.
	Owner string
	// Ctx is the caller's ctx (EventWaitStarted, EventAcquired,
	// EventAcquireFailed) or the hold's (EventReleased), so an Observer can
	// parent a span on the caller's trace. Nil for the other kinds. An
	// Observer must not keep it past the call.
	Ctx     context.Context
	Wait    time.Duration // EventAcquired, EventAcquireFailed, EventWaitStarted: time spent acquiring
	Held    time.Duration // EventReleased: time between acquire and release
	Renewed int           // EventRenewed: holds whose lease was extended
	Calls   int           // EventRenewed: script calls used for the round
	Took    time.Duration // EventRenewed: from the send of the call to its reply
	// Deadline (EventLost) is the deadline the Client kept for the hold:
	// the send of its last confirmed request + its lease − drift (zero
	// before any confirmation). A hold that ran out ended there, or a
	// little later on a busy process, whose timers run late.
	Deadline time.Time
	Err      error // EventAcquireFailed, EventLost, EventRenewed (transport error)
}

// Observer receives lock events for metrics and tracing. It is called
// synchronously from the goroutine doing the work, so it must be fast and
// must not call back into the Client.
type Observer interface {
	ObserveLock(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// ObserveLock calls f(e).
func (f ObserverFunc) ObserveLock(e Event) { f(e) }

// waitStarted is what reports EventWaitStarted to o (lockenv.Env.WaitStarted):
// nil without an observer.
func waitStarted(o Observer) func(ctx context.Context, name, key, lock string, wait time.Duration) {
	if o == nil {
		return nil
	}
	return func(ctx context.Context, name, key, lock string, wait time.Duration) {
		o.ObserveLock(Event{Kind: EventWaitStarted, Name: name, Key: key, Lock: lock, Ctx: ctx, Wait: wait})
	}
}

// observeTry reports the outcome of an acquisition begun at start by
// owner: EventAcquired, or EventAcquireFailed with err (and no owner).
func observeTry(o Observer, ctx context.Context, name, key, lock, owner string, start time.Time, err error) {
	if o == nil {
		return
	}
	e := Event{Kind: EventAcquired, Name: name, Key: key, Lock: lock, Owner: owner, Ctx: ctx, Wait: time.Since(start)}
	if err != nil {
		e.Kind, e.Owner, e.Err = EventAcquireFailed, "", err
	}
	o.ObserveLock(e)
}

// observeLoss reports EventLost of a composite hold (a multi-lock taken
// member by member, a RedLock), whose parts the registry does not report
// as the lock the caller took: once, when hctx ends lost (endedLost), not
// when it is released or the caller's ctx ends. Call it after the
// acquisition's EventAcquired.
func observeLoss(o Observer, hctx context.Context, name, key, lock, owner string) {
	if o == nil {
		return
	}
	context.AfterFunc(hctx, func() {
		if endedLost(hctx) {
			o.ObserveLock(Event{Kind: EventLost, Name: name, Key: key, Lock: lock, Owner: owner, Err: context.Cause(hctx)})
		}
	})
}

// endedLost reports whether hold ctx ended lost (ErrLockLost) or cut by
// Shutdown (ErrDraining): the ends EventLost reports.
func endedLost(hctx context.Context) bool {
	cause := context.Cause(hctx)
	return errors.Is(cause, ErrLockLost) || errors.Is(cause, ErrDraining)
}

// observeEnd reports the end of owner's hold taken at start by a release
// that returned err: EventLost when Redis no longer had it (ErrLockLost:
// the registry, which had not seen it lost, reports nothing), else
// EventReleased (a release left to finish in the background too).
func observeEnd(o Observer, ctx context.Context, name, key, lock, owner string, start time.Time, err error) {
	switch {
	case o == nil:
	case errors.Is(err, ErrLockLost):
		o.ObserveLock(Event{Kind: EventLost, Name: name, Key: key, Lock: lock, Owner: owner, Err: err})
	default:
		observeRelease(o, ctx, name, key, lock, owner, start)
	}
}

// released reports whether the release of a composite lock's hold ctx
// that returned err ended a hold to report (observeEnd: released, or
// found lost): not when it released nothing (ErrNotHeld), nor when ctx
// had ended lost or cut, which was reported then (endedLost; a release
// may still succeed after: a fixed lease's ctx ends a drift before Redis
// lets the key go).
func released(ctx context.Context, err error) bool {
	return !errors.Is(err, ErrNotHeld) && !endedLost(ctx)
}

// observeRelease reports the release of owner's hold taken at start.
func observeRelease(o Observer, ctx context.Context, name, key, lock, owner string, start time.Time) {
	if o != nil {
		o.ObserveLock(Event{Kind: EventReleased, Name: name, Key: key, Lock: lock, Owner: owner, Ctx: ctx, Held: time.Since(start)})
	}
}
