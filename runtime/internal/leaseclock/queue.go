package leaseclock

import (
	"math"
	"sync/atomic"
	"time"
)

// An Entry is an item's place on the clock: its Term, and where it sits on
// a Queue. Embed it in the item; its zero value is off every queue.
type Entry struct {
	Term
	idx int // its index in the queue's heap, plus one (0: off it)
}

// Queued reports whether the entry is on a queue.
func (e *Entry) Queued() bool { return e.idx > 0 }

// An Item is what a Queue holds: a pointer type with an Entry.
type Item interface {
	comparable
	LeaseEntry() *Entry
}

// None is the head of an empty queue.
const None = math.MaxInt64

// A Queue is a min-heap of items by the deadline they were put on it for,
// guarded by its owner's lock, that publishes its earliest deadline (Head)
// for lock-free readers. It is written out rather than used through
// container/heap, whose interface boxes values.
//
// Each slot of the heap carries the deadline its item was put on it for,
// so sifting compares slots without reading the items (a Client with many
// holds has them all over its heap: a read of one is a cache miss), and
// the heap is 4-ary: half the levels of a binary one, so half the items
// whose index a sift writes, and a node's four children are adjacent.
type Queue[T Item] struct {
	items []slot[T]
	head  atomic.Int64 // Unix ns of items[0].at, or None
}

// A slot is an item on the heap and the deadline (Unix ns) it is on it for.
type slot[T Item] struct {
	at int64
	it T
}

// Init readies an empty queue (the zero Queue reads as due at once).
func (q *Queue[T]) Init() { q.head.Store(None) }

// Len is the number of items on the queue.
func (q *Queue[T]) Len() int { return len(q.items) }

// Head is the earliest deadline on the queue in Unix ns (None: empty). It
// may be read without the owner's lock.
func (q *Queue[T]) Head() int64 { return q.head.Load() }

// Put puts it, not on the queue, on it at its Term's Valid. It reports
// whether it is now the earliest: the Clock must then be told (Clock.Due).
func (q *Queue[T]) Put(it T) (earliest bool) {
	e := it.LeaseEntry()
	at := e.Valid.UnixNano()
	q.items = append(q.items, slot[T]{at, it})
	e.idx = len(q.items)
	q.up(len(q.items) - 1)
	if e.idx != 1 {
		return false
	}
	q.head.Store(at)
	return true
}

// Remove takes it off the queue, if it is on it.
func (q *Queue[T]) Remove(it T) {
	e := it.LeaseEntry()
	if i := e.idx - 1; i >= 0 && i < len(q.items) && q.items[i].it == it {
		q.removeAt(i)
		q.publish() // later or none: the Clock may wake for nothing once
	}
}

// Expire takes off every item whose deadline is not after now and calls
// end for it, except an item confirmed since it was put (its Valid moved
// past now), which is put back for its new deadline.
func (q *Queue[T]) Expire(now time.Time, end func(T)) {
	for len(q.items) > 0 {
		if q.items[0].at > now.UnixNano() {
			break
		}
		it := q.items[0].it
		if e := it.LeaseEntry(); e.Valid.After(now) {
			q.items[0].at = e.Valid.UnixNano() // confirmed meanwhile
			q.down(0)
			continue
		}
		q.removeAt(0)
		end(it)
	}
	q.publish()
}

func (q *Queue[T]) publish() {
	if len(q.items) == 0 {
		q.head.Store(None)
		return
	}
	q.head.Store(q.items[0].at)
}

func (q *Queue[T]) less(i, j int) bool { return q.items[i].at < q.items[j].at }

func (q *Queue[T]) swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].it.LeaseEntry().idx, q.items[j].it.LeaseEntry().idx = i+1, j+1
}

func (q *Queue[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / arity
		if !q.less(i, p) {
			break
		}
		q.swap(i, p)
		i = p
	}
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
		q.swap(i, small)
		i = small
	}
}

// arity is the number of children of a node of the heap.
const arity = 4

func (q *Queue[T]) removeAt(i int) {
	last := len(q.items) - 1
	it := q.items[i].it
	if i != last {
		q.swap(i, last)
	}
	q.items[last] = slot[T]{}
	q.items = q.items[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
	it.LeaseEntry().idx = 0
}
