package renew

import "time"

// An Entry is an item's place on a wheel: embed it in the item.
type Entry struct {
	// Due is when the item's next renewal is due (Unix ns): 8 bytes, not
	// a time.Time's 24, so that what a round reads of a hold fits in few
	// cache lines.
	Due int64
}

// An Item is what a Wheel holds: a pointer type with an Entry.
type Item interface {
	comparable
	RenewEntry() *Entry
}

// A Wheel keeps items by the tick their renewal is due in. It is guarded
// by its owner's lock.
type Wheel[T Item] struct {
	buckets map[int64][]T
	next    int64 // the first tick not yet taken off (0: none taken yet)
	// spare are emptied buckets, kept for the ticks to come: a wheel
	// of many holds fills a bucket per tick, and growing a new one each
	// time is most of what scheduling allocates.
	spare [][]T
}

// Put schedules it for a renewal at due. An entry it had is stale from
// then on.
func (w *Wheel[T]) Put(it T, due time.Time, t Timing) {
	it.RenewEntry().Due = due.UnixNano()
	i := max(t.TickOf(due), w.next)
	if w.buckets == nil {
		w.buckets = make(map[int64][]T)
	}
	b, ok := w.buckets[i]
	if !ok && len(w.spare) > 0 {
		b = w.spare[len(w.spare)-1]
		w.spare = w.spare[:len(w.spare)-1]
	}
	w.buckets[i] = append(b, it)
}

// drop takes bucket i off the wheel and keeps its array for reuse.
func (w *Wheel[T]) drop(i int64, b []T) {
	delete(w.buckets, i)
	if cap(b) > 0 && len(w.spare) < maxSpare {
		clear(b[:cap(b)]) // hold no items for the collector
		w.spare = append(w.spare, b[:0])
	}
}

// maxSpare bounds the emptied buckets a wheel keeps.
const maxSpare = 8

// TakeDue takes every item due by now off the wheel and calls take for
// each one not rescheduled since; take reports whether it took the item
// (an item it refuses, released or in flight, is dropped from the wheel).
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
		for _, it := range b {
			if t.tick(it.RenewEntry().Due) <= i {
				take(it)
			}
		}
		w.drop(i, b)
	}
	w.next = max(w.next, last+1)
}

// TakeEarly takes items due up to the tick horizon (see
// Timing.EarlyHorizon) off the wheel, earliest first, while room reports
// there is room for more; take is as for TakeDue.
func (w *Wheel[T]) TakeEarly(horizon int64, t Timing, room func() bool, take func(T) bool) {
	for i := w.next; i <= horizon && len(w.buckets) > 0 && room(); i++ {
		bucket := w.buckets[i]
		for j := 0; j < len(bucket) && room(); {
			if it := bucket[j]; t.tick(it.RenewEntry().Due) == i && take(it) {
				bucket[j] = bucket[len(bucket)-1] // renewed early: its entry goes
				bucket = bucket[:len(bucket)-1]
				continue
			}
			j++
		}
		if len(bucket) == 0 {
			w.drop(i, bucket)
		} else {
			w.buckets[i] = bucket
		}
	}
}
