package runtime

import "time"

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventAcquired: a hold was taken (Wait is the time spent acquiring).
	EventAcquired EventKind = iota + 1
	// EventAcquireFailed: an acquisition gave up (Err says why).
	EventAcquireFailed
	// EventReleased: a hold was released (Held is how long it was held).
	EventReleased
	// EventLost: a hold was lost (Err wraps ErrLockLost).
	EventLost
	// EventRenewed: one watchdog round finished (Renewed holds in Calls script calls).
	EventRenewed
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
	}
	return "unknown"
}

// Event is what an Observer is told. Fields that do not apply to a Kind are zero.
type Event struct {
	Kind    EventKind
	Name    string        // logical lock name (LockOptions.Name)
	Key     string        // Redis key
	Wait    time.Duration // EventAcquired, EventAcquireFailed: time spent acquiring
	Held    time.Duration // EventReleased: time between acquire and release
	Renewed int           // EventRenewed: holds whose lease was extended
	Calls   int           // EventRenewed: script calls used for the round
	Err     error         // EventAcquireFailed, EventLost, EventRenewed (transport error)
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
