package settle

import (
	"context"
	"sync"
	"time"
)

// A Job is one piece of background work.
type Job struct {
	Try   func(ctx context.Context) bool // one attempt; true: nothing is left to do
	Until time.Time                      // given up then: Redis has expired what it was about
	Quit  func()                         // if set, runs when the job is given up or Config.Life ended
}

// Config is what a Settler is told by its Client.
type Config struct {
	Life context.Context // ends every attempt; once done, the jobs left are quit
	Try  time.Duration   // bounds one attempt
	// Failed (required) is told when an attempt failed: its calls may
	// have gone to a dead master (the job does not say why it failed).
	Failed func()
}

// The pause after a failed round doubles from MinBackoff up to MaxBackoff.
const (
	MinBackoff = 20 * time.Millisecond
	MaxBackoff = time.Second
)

// A Settler runs Jobs in the background. Make it with New.
type Settler struct {
	cfg     Config
	mu      sync.Mutex
	jobs    []Job
	running bool // the goroutine runs; false: jobs is empty
	// closed is set by Close before it waits: a job queued after that
	// would reuse the WaitGroup under its Wait (which panics).
	closed bool
	wg     sync.WaitGroup
}

// New returns an idle Settler.
func New(cfg Config) *Settler { return &Settler{cfg: cfg} }

// Add queues j, starting the goroutine if needed; after Close it drops j
// without running its Quit.
func (s *Settler) Add(j Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.jobs = append(s.jobs, j)
	if !s.running {
		s.running = true
		s.wg.Add(1)
		go s.run()
	}
}

// Close refuses jobs from now on and waits until the goroutine has done or
// quit those it has (soon once Config.Life is done or their Until past).
// It cancels nothing itself.
func (s *Settler) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
}

// run tries the queued jobs in turn until none is left.
func (s *Settler) run() {
	defer s.wg.Done()
	backoff := MinBackoff
	for {
		s.mu.Lock()
		jobs := s.jobs
		s.jobs = nil
		if s.running = len(jobs) > 0; !s.running {
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		left, failed := s.round(jobs)
		s.mu.Lock()
		s.jobs = append(left, s.jobs...)
		s.mu.Unlock()
		if !failed {
			backoff = MinBackoff
			continue
		}
		s.cfg.Failed()
		select { // time.After's timer needs no Stop (Go 1.23)
		case <-s.cfg.Life.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, MaxBackoff)
	}
}

// round tries jobs in order until one fails, and returns those left: the
// untried ones, then the failed one.
func (s *Settler) round(jobs []Job) (left []Job, failed bool) {
	try := func(j Job) bool {
		ctx, cancel := context.WithTimeout(s.cfg.Life, s.cfg.Try)
		defer cancel()
		return j.Try(ctx)
	}
	var fail *Job
	for _, j := range jobs {
		switch {
		case s.cfg.Life.Err() != nil || time.Now().After(j.Until):
			if j.Quit != nil {
				j.Quit()
			}
		case fail != nil:
			left = append(left, j)
		case !try(j):
			fail = &j
		}
	}
	if fail != nil {
		left = append(left, *fail)
	}
	return left, fail != nil
}

// Idle reports whether the Settler has no work left.
func (s *Settler) Idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.running
}
