package settle

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newSettler(t *testing.T) (*Settler, context.CancelFunc, *atomic.Int32) {
	life, end := context.WithCancel(context.Background())
	var failed atomic.Int32
	s := New(Config{Life: life, Try: 50 * time.Millisecond, Failed: func() { failed.Add(1) }})
	t.Cleanup(func() { end(); s.Close() })
	return s, end, &failed
}

func waitIdle(t *testing.T, s *Settler) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !s.Idle(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the settler never went idle")
		}
	}
}

func TestAJobThatSucceedsRunsOnce(t *testing.T) {
	s, _, failed := newSettler(t)
	var tries atomic.Int32
	s.Add(Job{Try: func(context.Context) bool { tries.Add(1); return true }, Until: time.Now().Add(time.Minute)})
	waitIdle(t, s)
	if tries.Load() != 1 || failed.Load() != 0 {
		t.Fatalf("tries %d, failed rounds %d; want 1 and 0", tries.Load(), failed.Load())
	}
}

func TestAFailingJobDoesNotHoldUpTheOthers(t *testing.T) {
	s, _, failed := newSettler(t)
	var poison atomic.Int32
	gave := make(chan struct{})
	s.Add(Job{
		Try:   func(context.Context) bool { poison.Add(1); return false },
		Until: time.Now().Add(300 * time.Millisecond),
		Quit:  func() { close(gave) },
	})
	good := make(chan time.Time, 1)
	start := time.Now()
	s.Add(Job{Try: func(context.Context) bool { good <- time.Now(); return true }, Until: time.Now().Add(time.Minute)})
	// The good job waits one backoff at most behind the failing one.
	if took := (<-good).Sub(start); took > MinBackoff+200*time.Millisecond {
		t.Fatalf("the good job ran %v after it was queued", took)
	}
	<-gave
	waitIdle(t, s)
	if n := poison.Load(); n < 2 || failed.Load() < 2 {
		t.Fatalf("the failing job was tried %d times (%d failed rounds); want retries with backoff", n, failed.Load())
	}
}

func TestEveryAttemptIsBoundedAndCloseQuitsWhatIsLeft(t *testing.T) {
	s, end, _ := newSettler(t)
	var mu sync.Mutex
	var bounds []time.Duration
	quit := make(chan struct{})
	s.Add(Job{
		Try: func(ctx context.Context) bool {
			d, _ := ctx.Deadline()
			mu.Lock()
			bounds = append(bounds, time.Until(d))
			mu.Unlock()
			<-ctx.Done() // a call stuck on a dead connection
			return false
		},
		Until: time.Now().Add(time.Hour),
		Quit:  func() { close(quit) },
	})
	time.Sleep(120 * time.Millisecond)
	end()
	s.Close()
	select {
	case <-quit:
	default:
		t.Fatal("Close returned without quitting the job left")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range bounds {
		if b > 50*time.Millisecond {
			t.Fatalf("an attempt had %v, more than Config.Try", b)
		}
	}
	ran := false
	s.Add(Job{Try: func(context.Context) bool { ran = true; return true }, Until: time.Now().Add(time.Hour)})
	if !s.Idle() || ran {
		t.Fatal("a job queued after Close ran")
	}
}
