package settle

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Idle (Shutdown waits for it) is never true while a job is queued,
// tried, or waiting out the backoff after a failed attempt.
func TestIdleOnlyOnceEveryJobIsDone(t *testing.T) {
	s, _, _ := newSettler(t)
	if !s.Idle() {
		t.Fatal("a new settler is not idle")
	}
	var done atomic.Int32 // jobs done
	release := make(chan struct{})
	var fails atomic.Int32
	s.Add(Job{Try: func(context.Context) bool { <-release; done.Add(1); return true }, Until: time.Now().Add(time.Minute)})
	s.Add(Job{Try: func(context.Context) bool {
		if fails.Add(1) <= 2 {
			return false // two backoffs
		}
		done.Add(1)
		return true
	}, Until: time.Now().Add(time.Minute)})
	stop := make(chan struct{})
	early := make(chan int32, 1)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			// done is set before its job returns, running cleared after:
			// idle with a job left is Idle's error, not the sampling's.
			if s.Idle() {
				if n := done.Load(); n < 2 {
					early <- n
					return
				}
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	time.Sleep(20 * time.Millisecond)
	s.Add(Job{Try: func(context.Context) bool { return true }, Until: time.Now().Add(time.Minute)}) // queued behind the blocked one
	close(release)
	waitIdle(t, s)
	close(stop)
	select {
	case n := <-early:
		t.Fatalf("Idle reported true with %d of 2 jobs done", n)
	default:
	}
	if done.Load() != 2 {
		t.Fatalf("%d of 2 jobs done once idle", done.Load())
	}
}
