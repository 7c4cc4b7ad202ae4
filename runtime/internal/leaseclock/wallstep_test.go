package leaseclock

import (
	"testing"
	"time"
	"unsafe"
)

// stepped returns t's instant as the process reads it after the wall
// clock was stepped by step (NTP, an operator): t's monotonic reading,
// the wall reading moved. It writes time.Time's fields (wall, ext: the
// monotonic reading, as every time.Now has one).
func stepped(t time.Time, step time.Duration) time.Time {
	s := t.Add(step)
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	(*layout)(unsafe.Pointer(&s)).ext = (*layout)(unsafe.Pointer(&t)).ext
	return s
}

// A hold's lease is measured on the monotonic clock, as Redis measures
// its TTL on its own: after the wall clock steps back 10 s, a hold whose
// deadline passed 100 ms ago is ended, not 10 s late (with Unix time it
// was: its key long expired in Redis, the lock free for another owner),
// and when the wall clock steps forward, one whose deadline is 100 ms
// away is not ended early (with Unix time Expire then spun for ever,
// putting it back for a deadline it found both past and to come, with its
// shard's lock held: the Client hung).
func TestAWallClockStepMovesNoDeadline(t *testing.T) {
	start := time.Now()
	if d := stepped(start, time.Second).Sub(start); d != 0 {
		t.Fatalf("stepped moved the monotonic reading by %v: time.Time's layout changed, fix the helper", d)
	}
	for _, c := range []struct {
		step, after time.Duration
		ended       bool
	}{
		{-10 * time.Second, 200 * time.Millisecond, true},
		{10 * time.Second, 0, false},
	} {
		var q Queue[*item]
		q.Init()
		it := &item{name: "x"}
		it.Confirm(start, 100*time.Millisecond+Drift(100*time.Millisecond), start) // deadline: start + 100 ms
		q.Put(it)
		now := stepped(start.Add(c.after), c.step)
		var ended bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			q.Expire(now, func(*item) { ended = true })
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// With Unix time a step forward made Expire put the hold
			// back again and again, its shard's lock held.
			t.Fatalf("wall clock stepped %v: Expire did not return", c.step)
		}
		if ended != c.ended {
			t.Errorf("wall clock stepped %v, %v after the hold's start: ended %v, want %v", c.step, c.after, ended, c.ended)
		}
	}
}
