package renew

import (
	"time"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
)

// An Entry is an item's place on a wheel: embed it in the item. Due is
// when its next renewal is due (leaseclock.Nanos: 8 bytes, not a
// time.Time's 24, so what a round reads of a hold fits in few lines).
type Entry struct{ Due int64 }

// An Item is what a Wheel holds: a pointer type with an Entry.
type Item interface {
	comparable
	RenewEntry() *Entry
}

// A Wheel keeps items by the tick their renewal is due in, guarded by its
// owner's lock.
type Wheel[T Item] struct {
	buckets map[int64]*bucket[T]
	next    int64 // the first tick not yet taken off (0: none taken yet)
	// spare are emptied buckets, kept for the ticks to come: growing one
	// per tick was most of what scheduling allocated.
	spare []*bucket[T]
}

// A bucket is the items due in one tick.
type bucket[T Item] struct{ items []T }

// Put schedules it for a renewal at due (in a tick already taken off: the
// next one); an entry it had goes stale, skipped if due is past its tick.
func (w *Wheel[T]) Put(it T, due time.Time, t Timing) {
	it.RenewEntry().Due = leaseclock.Nanos(due)
	b := w.bucket(max(t.TickOf(due), w.next))
	b.items = append(b.items, it)
}

// bucket is the bucket of tick i, made if there is none.
func (w *Wheel[T]) bucket(i int64) *bucket[T] {
	if w.buckets == nil {
		w.buckets = make(map[int64]*bucket[T])
	}
	b := w.buckets[i]
	if b == nil {
		if n := len(w.spare); n > 0 {
			b = w.spare[n-1]
			w.spare = w.spare[:n-1]
		} else {
			b = new(bucket[T])
		}
		w.buckets[i] = b
	}
	return b
}

// drop takes bucket i off the wheel and keeps it for reuse.
func (w *Wheel[T]) drop(i int64, b *bucket[T]) {
	delete(w.buckets, i)
	if len(w.spare) < maxSpare {
		clear(b.items[:cap(b.items)]) // hold no items for the collector
		b.items = b.items[:0]
		w.spare = append(w.spare, b)
	}
}

const maxSpare = 8

// TakeDue takes every item due by now off the wheel and calls take for
// each one not rescheduled to a later tick since (an item rescheduled
// earlier is offered again by its old entry); take reports whether it
// took the item (one refused, released or in flight, leaves the wheel too).
func (w *Wheel[T]) TakeDue(now time.Time, t Timing, take func(T) bool) {
	last := t.TickOf(now)
	if w.next == 0 { // first round: start at the earliest entry
		w.next = last
		for i := range w.buckets {
			w.next = min(w.next, i)
		}
	}
	for i := w.next; i <= last && len(w.buckets) > 0; i++ {
		b := w.buckets[i]
		if b == nil {
			continue
		}
		for _, it := range b.items {
			if t.tick(it.RenewEntry().Due) <= i {
				take(it)
			}
		}
		w.drop(i, b)
	}
	w.next = max(w.next, last+1)
}

// TakeEarly takes items due up to the tick horizon (EarlyHorizon) off the
// wheel, earliest first, while room reports room; take reports whether it
// took one.
func (w *Wheel[T]) TakeEarly(horizon int64, t Timing, room func() bool, take func(T) bool) {
	for i := w.next; i <= horizon && len(w.buckets) > 0 && room(); i++ {
		b := w.buckets[i]
		if b == nil {
			continue
		}
		items := b.items
		for j := 0; j < len(items) && room(); {
			if it := items[j]; t.tick(it.RenewEntry().Due) == i && take(it) {
				items[j] = items[len(items)-1] // renewed early: its entry goes
				items = items[:len(items)-1]
				continue
			}
			j++
		}
		b.items = items
		if len(items) == 0 {
			w.drop(i, b)
		}
	}
}
