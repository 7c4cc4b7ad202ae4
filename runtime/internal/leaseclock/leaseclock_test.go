package leaseclock

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// item is a hold as the clock sees it.
type item struct {
	Entry
	name  string
	ended bool
}

func (it *item) LeaseEntry() *Entry { return &it.Entry }

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestDeadlineIsTheSendTimePlusTheLeaseMinusDrift(t *testing.T) {
	var term Term
	if first := term.Confirm(at(0), 30*time.Second, at(5)); !first {
		t.Fatal("the first confirmation did not say so")
	}
	if want := at(30000 - 305); !term.Valid.Equal(want) {
		t.Fatalf("Valid = %v, want send + 30s - (300ms + 5ms) = %v", term.Valid, want)
	}
	if !term.End.Equal(at(30000)) {
		t.Fatalf("End = %v, want send + lease", term.End)
	}
	if got := term.Left(at(10000)); got != 20*time.Second {
		t.Fatalf("Left 10 s after the send = %v, want 20s", got)
	}
}

func TestTermOnlyMovesForward(t *testing.T) {
	var term Term
	term.Confirm(at(1000), 3*time.Second, at(1001))
	valid, end := term.Valid, term.End
	// An older confirmation arriving late (a reply overtaken by a newer
	// one) moves nothing.
	if first := term.Confirm(at(500), 3*time.Second, at(1002)); first || !term.Valid.Equal(valid) || !term.End.Equal(end) {
		t.Fatalf("an older confirmation moved the term: %+v", term)
	}
	// A shorter lease sent later moves neither back.
	term.Confirm(at(1100), 100*time.Millisecond, at(1101))
	if !term.Valid.Equal(valid) || !term.End.Equal(end) {
		t.Fatalf("a shorter lease moved the term back: %+v", term)
	}
	term.Confirm(at(2000), 3*time.Second, at(2001))
	if !term.Valid.After(valid) || !term.End.Equal(at(5000)) {
		t.Fatalf("a newer confirmation did not move the term: %+v", term)
	}
}

// A confirmation that arrives once the deadline has passed never revives
// the hold: its ctx must be done by the deadline whatever comes later.
func TestLateConfirmationNeverRevivesAPassedDeadline(t *testing.T) {
	var term Term
	term.Confirm(at(0), time.Second, at(1))
	valid := term.Valid
	term.Confirm(at(900), time.Second, valid) // its reply came at the deadline
	if !term.Valid.Equal(valid) {
		t.Fatalf("Valid moved from %v to %v after the deadline", valid, term.Valid)
	}
	if !term.End.Equal(at(1900)) {
		t.Fatalf("End = %v: what Redis may still keep is still recorded (a later request must not cut it)", term.End)
	}
}

func TestQueueKeepsDeadlineOrderThroughRemovals(t *testing.T) {
	var q Queue[*item]
	q.Init()
	rng := rand.New(rand.NewPCG(1, 2))
	var in []*item
	for range 2000 {
		it := &item{}
		it.Valid = at(rng.IntN(10000))
		q.Put(it)
		in = append(in, it)
		if rng.IntN(3) == 0 { // a release: leaves from anywhere
			i := rng.IntN(len(in))
			q.Remove(in[i])
			if in[i].on {
				t.Fatal("a removed item says it is queued")
			}
			in = slices.Delete(in, i, i+1)
		}
		live := 0
		for i, s := range q.items {
			if s.at != Nanos(s.it.Valid) {
				t.Fatalf("slot %d is at %d, its item's deadline %v", i, s.at, s.it.Valid)
			}
			if i > 0 && s.at < q.items[(i-1)/arity].at {
				t.Fatalf("slot %d is earlier than its parent", i)
			}
			if s.live() {
				live++
			}
		}
		if live != len(in) || q.Len() != len(in) {
			t.Fatalf("%d live slots, Len %d, %d items put and not removed", live, q.Len(), len(in))
		}
		if q.dead > live {
			t.Fatalf("%d dead slots beside %d live ones: the heap was not rebuilt", q.dead, live)
		}
		if len(q.items) > 0 && q.Head() != q.items[0].at {
			t.Fatal("Head is not the earliest deadline")
		}
	}
	slices.SortFunc(in, func(a, b *item) int { return a.Valid.Compare(b.Valid) })
	var out []*item
	q.Expire(at(10000), func(it *item) { out = append(out, it) })
	if len(out) != len(in) {
		t.Fatalf("expired %d of %d", len(out), len(in))
	}
	for i := range in {
		if !out[i].Valid.Equal(in[i].Valid) {
			t.Fatalf("expiry %d: %v, want %v", i, out[i].Valid, in[i].Valid)
		}
	}
	if q.Head() != None {
		t.Fatal("an empty queue has a head")
	}
}

// An item confirmed after it was put is not ended at its old deadline: it
// is put back for the new one, and ended there.
func TestExpireMovesConfirmedItemsToTheirNewDeadline(t *testing.T) {
	var q Queue[*item]
	q.Init()
	a, b := &item{name: "a"}, &item{name: "b"}
	a.Confirm(at(0), time.Second, at(0))
	b.Confirm(at(0), 2*time.Second, at(0))
	if !q.Put(a) || q.Put(b) {
		t.Fatal("Put misreported the earliest")
	}
	a.Confirm(at(500), time.Second, at(501)) // renewed: Valid moves, its place does not
	if q.Head() != Nanos(at(1000-15)) {
		t.Fatalf("the head moved without a clock operation")
	}
	var ended []string
	end := func(it *item) { it.ended = true; ended = append(ended, it.name) }
	q.Expire(at(1000), end)
	if len(ended) != 0 || q.Head() != Nanos(at(1500-15)) {
		t.Fatalf("at 1 s: ended %v, head %v; want none ended and a back at its new deadline", ended, Time(q.Head()).Sub(t0))
	}
	q.Expire(at(1500-15), end)
	if !slices.Equal(ended, []string{"a"}) {
		t.Fatalf("at a's new deadline ended %v", ended)
	}
	q.Expire(at(5000), end)
	if !slices.Equal(ended, []string{"a", "b"}) || q.Len() != 0 {
		t.Fatalf("ended %v, %d left", ended, q.Len())
	}
}

// queues is an owner of one queue under a mutex, with an injected time.
type queues struct {
	mu    sync.Mutex
	q     Queue[*item]
	ended []string
}

func (o *queues) Earliest() int64 { return o.q.Head() }

func (o *queues) ExpireDue(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.q.Expire(now, func(it *item) { o.ended = append(o.ended, it.name) })
}

func TestClockSleepsUntilTheEarliestDeadlineOrTheHorizon(t *testing.T) {
	o := &queues{}
	o.q.Init()
	var c Clock
	now := at(0)
	clock := func() time.Time { return now }
	if sleep := c.step(o, clock); sleep != Horizon {
		t.Fatalf("empty: sleeps %v, want the horizon %v", sleep, Horizon)
	}
	it := &item{name: "x"}
	it.Confirm(at(0), 300*time.Millisecond, at(0)) // deadline 292 ms
	o.q.Put(it)
	if sleep := c.step(o, clock); sleep != 292*time.Millisecond {
		t.Fatalf("sleeps %v, want until the deadline (292ms)", sleep)
	}
	now = at(292)
	c.step(o, clock)
	if !slices.Equal(o.ended, []string{"x"}) {
		t.Fatalf("at the deadline ended %v", o.ended)
	}
}

// A deadline put before the goroutine's next wake-up wakes it; a later one
// does not.
func TestDueWakesTheClockOnlyForAnEarlierDeadline(t *testing.T) {
	var c Clock
	c.wake = make(chan struct{}, 1)
	c.next.Store(Nanos(at(500)))
	c.Due(at(800))
	if len(c.wake) != 0 {
		t.Fatal("a later deadline woke the clock")
	}
	c.Due(at(200))
	if len(c.wake) != 1 || c.next.Load() != Nanos(at(200)) {
		t.Fatal("an earlier deadline did not wake the clock")
	}
}

// The goroutine ends a hold at its deadline, in real time, and stops with
// its owner.
func TestClockEndsItemsOnTime(t *testing.T) {
	o := &queues{}
	o.q.Init()
	var c Clock
	stop := make(chan struct{})
	c.Start(o, stop)
	start := time.Now()
	it := &item{name: "x"}
	o.mu.Lock()
	it.Confirm(start, 100*time.Millisecond, start)
	if o.q.Put(it) {
		c.Due(it.Valid)
	}
	o.mu.Unlock()
	for {
		o.mu.Lock()
		done := len(o.ended) == 1
		o.mu.Unlock()
		if done {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("not ended 5 s after a 95 ms deadline")
		}
		time.Sleep(time.Millisecond)
	}
	if early := time.Until(it.Valid); early > 0 {
		t.Fatalf("ended %v before its deadline", early)
	}
	close(stop)
	c.Wait()
}

// An item removed and put again is on the queue once: its dead slot ends
// nothing, and it is ended once, at its deadline.
func TestRemovedItemPutAgainIsEndedOnce(t *testing.T) {
	var q Queue[*item]
	q.Init()
	a, b := &item{name: "a"}, &item{name: "b"}
	a.Valid, b.Valid = at(100), at(200)
	q.Put(a)
	q.Put(b)
	q.Remove(a)
	q.Put(a)
	if q.Len() != 2 {
		t.Fatalf("Len %d, want 2", q.Len())
	}
	var ended []string
	q.Expire(at(300), func(it *item) { ended = append(ended, it.name) })
	if !slices.Equal(ended, []string{"a", "b"}) {
		t.Fatalf("ended %v, want [a b]", ended)
	}
	if q.Len() != 0 || len(q.items) != 0 || q.Head() != None {
		t.Fatalf("Len %d, %d slots, head %d after every item ended", q.Len(), len(q.items), q.Head())
	}
}

// A model check of the lazy queue: items put once, confirmed (Valid
// moves forward), removed, expired at advancing times. Every item on the
// queue is ended exactly once, in the first Expire whose now reaches its
// Valid, never before it, and never after it was removed; dead slots
// never outnumber live ones (their memory, and their items', is bounded).
func TestQueueEndsEachItemOnceOnTimeAndKeepsFewDeadSlots(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var q Queue[*item]
		q.Init()
		type st struct {
			it      *item
			removed bool
			ended   int
		}
		var all []*st
		byItem := map[*item]*st{}
		now := 0
		for step := 0; step < 3000; step++ {
			switch op := rng.IntN(10); {
			case op < 3: // a new hold, first confirmation
				it := &item{}
				it.Confirm(at(now), time.Duration(50+rng.IntN(500))*time.Millisecond, at(now))
				q.Put(it)
				s := &st{it: it}
				all = append(all, s)
				byItem[it] = s
			case op < 6 && len(all) > 0: // a renewal confirmed
				s := all[rng.IntN(len(all))]
				s.it.Confirm(at(now-rng.IntN(5)), time.Duration(50+rng.IntN(500))*time.Millisecond, at(now))
			case op < 8 && len(all) > 0: // a release
				s := all[rng.IntN(len(all))]
				if s.ended == 0 && !s.removed {
					q.Remove(s.it)
					s.removed = true
				}
			default: // the clock
				now += rng.IntN(40)
				q.Expire(at(now), func(it *item) {
					s := byItem[it]
					s.ended++
					if s.removed {
						t.Fatalf("seed %d: a removed item was ended", seed)
					}
					if it.Valid.After(at(now)) {
						t.Fatalf("seed %d: ended before its deadline", seed)
					}
				})
				for _, s := range all {
					if !s.removed && s.ended == 0 && !s.it.Valid.After(at(now)) {
						t.Fatalf("seed %d: an item due at %v not ended at %v", seed, s.it.Valid.Sub(t0), at(now).Sub(t0))
					}
					if s.ended > 1 {
						t.Fatalf("seed %d: ended %d times", seed, s.ended)
					}
				}
				if h := q.Head(); len(q.items) > 0 && h != q.items[0].at {
					t.Fatalf("seed %d: head %d, slot 0 at %d", seed, h, q.items[0].at)
				}
			}
			if q.dead < 0 || 2*q.dead > len(q.items) {
				t.Fatalf("seed %d: %d dead of %d slots", seed, q.dead, len(q.items))
			}
		}
	}
}

// Expiries that take the live slots leave the dead ones (and the removed
// items they point to) behind no longer than a Remove does: not until
// their old deadline, an hour away.
func TestExpiriesDoNotLeaveMoreDeadSlotsThanLiveOnes(t *testing.T) {
	var q Queue[*item]
	q.Init()
	var long []*item
	for range 2 {
		l, s := &item{}, &item{}
		l.Valid, s.Valid = at(3600_000), at(1000) // a 1 h fixed lease, a 1 s one
		q.Put(l)
		q.Put(s)
		long = append(long, l)
	}
	for _, l := range long {
		q.Remove(l) // released early: 2 dead of 4, not more than half
	}
	q.Expire(at(2000), func(*item) {}) // the short ones end
	if q.Len() == 0 && len(q.items) > 0 {
		t.Fatalf("no live item, %d dead slots kept until their old deadline, 1 h away", len(q.items))
	}
	if q.Head() != None {
		t.Fatalf("an empty queue's head is %d", q.Head())
	}
}

// Len is the number of items on the queue.
func (q *Queue[T]) Len() int { return len(q.items) - q.dead }
