package leaseclock

import (
	"sync"
	"sync/atomic"
	"time"
)

// Horizon is the longest the Clock sleeps before it reads the heads again:
// a Put further away than that never wakes it.
const Horizon = time.Second

// A Clock is the goroutine that ends items at their deadlines, over the
// Queues of its owner: an item costs no timer, goroutine or allocation.
type Clock struct {
	once sync.Once
	next atomic.Int64 // when the goroutine wakes next (Nanos)
	wake chan struct{}
	done chan struct{}
}

// Queues is what a Clock runs over: the earliest Head of the owner's
// queues, and Queue.Expire of those due, under each queue's lock.
type Queues interface {
	Earliest() int64
	ExpireDue(now time.Time)
}

// Start starts the goroutine on first use; it runs until stop is closed.
func (c *Clock) Start(qs Queues, stop <-chan struct{}) {
	c.once.Do(func() {
		c.wake = make(chan struct{}, 1)
		c.done = make(chan struct{})
		c.next.Store(None)
		go c.run(qs, stop)
	})
}

// Due tells the started clock that a queue's earliest deadline is now at
// (a Put reported earliest): it wakes the goroutine if that is sooner than
// it would wake.
func (c *Clock) Due(at time.Time) {
	t := Nanos(at)
	// step reads the heads after it publishes next: a head it missed sees
	// its next here.
	for {
		next := c.next.Load()
		if t >= next {
			return
		}
		if c.next.CompareAndSwap(next, t) {
			break
		}
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Wait blocks until the goroutine (if started) has stopped once stop is
// closed. No goroutine starts after it.
func (c *Clock) Wait() {
	c.once.Do(func() {})
	if c.done != nil {
		<-c.done
	}
}

func (c *Clock) run(qs Queues, stop <-chan struct{}) {
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		sleep := c.step(qs, time.Now)
		if sleep <= 0 {
			continue
		}
		timer.Reset(sleep)
		select {
		case <-timer.C:
		case <-c.wake:
			timer.Stop()
		case <-stop:
			return
		}
	}
}

// step expires what is due and returns how long to sleep (<= 0: none).
func (c *Clock) step(qs Queues, now func() time.Time) time.Duration {
	t := now()
	if qs.Earliest() <= Nanos(t) {
		qs.ExpireDue(t)
	}
	// Publish next, then read the heads again: a deadline put in between
	// is seen here or sees the new next (and wakes us).
	next := min(qs.Earliest(), Nanos(t)+int64(Horizon))
	c.next.Store(next)
	if again := qs.Earliest(); again < next {
		return 0
	}
	return time.Duration(next - Nanos(now()))
}
