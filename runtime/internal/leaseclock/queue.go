package leaseclock

import (
	"math"
	"sync/atomic"
	"time"
)

// An Entry is an item's place on the clock, embedded in the item: its
// Term, and whether it is on a Queue (the zero value is not).
type Entry struct {
	Term
	on  bool   // on a queue, in the slot of its last Put
	gen uint32 // counts its Puts: a slot of an earlier Put is dead
}

// An Item is what a Queue holds: a pointer type with an Entry.
type Item interface {
	comparable
	LeaseEntry() *Entry
}

// None is the head of an empty queue.
const None = math.MaxInt64

// A Queue is a 4-ary min-heap of items by the deadline they were put on
// it for, guarded by its owner's lock, that publishes its earliest
// deadline (Head) for lock-free readers. Its slots carry their deadlines,
// so a sift reads no item (one would be a cache miss per level); Remove
// therefore cannot find an item's slot: it marks the entry off, and the
// dead slot goes at the head, or when dead slots outnumber live ones and
// the heap is rebuilt without them.
type Queue[T Item] struct {
	items []slot[T]
	dead  int          // slots whose item was removed since
	head  atomic.Int64 // items[0].at (Nanos), or None
}

// A slot is an item on the heap, its deadline (Nanos), and the Put that
// made it (the entry's gen then).
type slot[T Item] struct {
	at  int64
	it  T
	gen uint32
}

// live reports whether s is its item's slot: not removed, nor put again.
func (s *slot[T]) live() bool {
	e := s.it.LeaseEntry()
	return e.on && e.gen == s.gen
}

// Init readies an empty queue (a zero Queue's head reads as due).
func (q *Queue[T]) Init() { q.head.Store(None) }

// Head is the earliest deadline (Nanos; None: empty), read without the
// owner's lock; it may be a removed item's.
func (q *Queue[T]) Head() int64 { return q.head.Load() }

// Put puts it, not on the queue, on it at its Term's Valid, and reports
// whether it is now the earliest (then tell the Clock: Clock.Due).
func (q *Queue[T]) Put(it T) (earliest bool) {
	e := it.LeaseEntry()
	e.on, e.gen = true, e.gen+1
	at := Nanos(e.Valid)
	q.items = append(q.items, slot[T]{at, it, e.gen})
	if q.up(len(q.items)-1) != 0 {
		return false
	}
	q.head.Store(at)
	return true
}

// Remove takes it off the queue, if it is on it.
func (q *Queue[T]) Remove(it T) {
	e := it.LeaseEntry()
	if !e.on {
		return
	}
	e.on = false
	if q.dead++; 2*q.dead > len(q.items) {
		q.compact()
	}
}

// Expire takes off every item whose deadline is not after now and calls
// end for it, except one confirmed since it was put (Valid moved past
// now), which is put back for its new deadline.
func (q *Queue[T]) Expire(now time.Time, end func(T)) {
	for len(q.items) > 0 && q.items[0].at <= Nanos(now) {
		s := &q.items[0]
		e := s.it.LeaseEntry()
		switch {
		case !s.live():
			q.pop()
			q.dead--
		case e.Valid.After(now):
			s.at = Nanos(e.Valid) // confirmed meanwhile
			q.down(0)
		default:
			it := s.it
			q.pop()
			e.on = false
			end(it)
		}
	}
	if 2*q.dead > len(q.items) { // expiries took live slots: keep the bound
		q.compact()
	} else {
		q.publish()
	}
}

func (q *Queue[T]) publish() {
	if len(q.items) == 0 {
		q.head.Store(None)
		return
	}
	q.head.Store(q.items[0].at)
}

func (q *Queue[T]) pop() {
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items[last] = slot[T]{}
	q.items = q.items[:last]
	if last > 0 {
		q.down(0)
	}
}

// compact rebuilds the heap from its live slots.
func (q *Queue[T]) compact() {
	live := q.items[:0]
	for i := range q.items {
		if q.items[i].live() {
			live = append(live, q.items[i])
		}
	}
	clear(q.items[len(live):])
	q.items, q.dead = live, 0
	for i := (len(q.items) - 2) / arity; i >= 0; i-- {
		q.down(i)
	}
	q.publish()
}

func (q *Queue[T]) less(i, j int) bool { return q.items[i].at < q.items[j].at }

// up sifts slot i up and returns where it ends.
func (q *Queue[T]) up(i int) int {
	for i > 0 {
		p := (i - 1) / arity
		if !q.less(i, p) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
	return i
}

func (q *Queue[T]) down(i int) {
	for {
		small := i
		first := arity*i + 1
		for c := first; c < min(first+arity, len(q.items)); c++ {
			if q.less(c, small) {
				small = c
			}
		}
		if small == i {
			return
		}
		q.items[i], q.items[small] = q.items[small], q.items[i]
		i = small
	}
}

const arity = 4 // children per node
