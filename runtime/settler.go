package runtime

import (
	"context"
	"sync"
	"time"
)

// The settler goes on, in the background, with work that must reach Redis
// but could not in the call that needed it: an acquire whose reply and
// settlement were both lost (settleLater), and what a hold lost at its
// deadline may still have in Redis (giveback.go). It is one goroutine per
// Client, running only while there is work: a partition that ends
// thousands of holds at once makes one queue, tried one job at a time
// while Redis answers and paused with a backoff while it does not, not
// thousands of goroutines polling a pool of a few connections.
//
// Its calls go through the watchdog's client, which honours ctx deadlines
// (control.go), each bounded by settleTry: a call stuck on a dead
// connection ends there rather than after go-redis' read timeouts and
// retries, so the work resumes soon after Redis answers again, and Close
// does not wait on a socket.

// settleJob is one piece of background work.
type settleJob struct {
	// try makes one attempt; true: nothing is left to do.
	try func(ctx context.Context) bool
	// until is when the job is given up: by then Redis has expired what
	// it was about.
	until time.Time
	// quit runs when the job is given up, or the Client is closed.
	quit func()
}

type settler struct {
	mu      sync.Mutex
	jobs    []settleJob
	running bool
	// closed is set by Close before it waits for the settler: a job
	// queued after that would start the settler after the Wait, or while
	// a Wait that saw it end wakes up (a WaitGroup reused under its Wait
	// panics).
	closed bool
}

// settleTry bounds one attempt of a job.
func (c *Client) settleTry() time.Duration { return min(c.opts.ReleaseTimeout, time.Second) }

// settleInBackground queues j, starting the settler if it is not running.
func (c *Client) settleInBackground(j settleJob) {
	s := &c.settler
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return // Close ends the work anyway; Redis expires what it was about
	}
	s.jobs = append(s.jobs, j)
	if !s.running {
		s.running = true
		c.background.Add(1)
		go c.runSettler()
	}
}

// closeSettler refuses jobs from now on; Close then waits for the settler
// to end those it has.
func (c *Client) closeSettler() {
	s := &c.settler
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// runSettler tries the queued jobs in turn until none is left. A failed
// attempt (Redis did not answer, or the owner's turn was not free) ends
// the round: the jobs after it wait with it for the backoff, and it goes
// behind them, so that the next round starts with them. A job that fails
// every time (a key overwritten with another type: every script on it gets
// WRONGTYPE until its lease is over) delays the others by a backoff, not
// by its lease.
func (c *Client) runSettler() {
	defer c.background.Done()
	s := &c.settler
	// Cancelled by Close even in the calls that detach (see detached).
	bg := context.WithValue(c.life, stayAttached{}, true)
	backoff := 20 * time.Millisecond
	for {
		s.mu.Lock()
		jobs := s.jobs
		s.jobs = nil
		if len(jobs) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		var left []settleJob
		var failed *settleJob
		for _, j := range jobs {
			switch {
			case c.life.Err() != nil || time.Now().After(j.until):
				j.quit()
				continue
			case failed != nil:
				left = append(left, j)
				continue
			}
			ctx, cancel := context.WithTimeout(bg, c.settleTry())
			done := j.try(ctx)
			cancel()
			if !done {
				failed = &j
			}
		}
		if failed != nil {
			left = append(left, *failed)
			// Its calls may have gone to a master that is dead
			// (failover.go); the job does not say why it failed.
			c.slots.reload()
		}
		s.mu.Lock()
		s.jobs = append(left, s.jobs...)
		s.mu.Unlock()
		if failed == nil {
			backoff = 20 * time.Millisecond
			continue
		}
		t := time.NewTimer(backoff)
		select {
		case <-c.life.Done():
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}
