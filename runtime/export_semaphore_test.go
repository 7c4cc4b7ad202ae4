package runtime

// SemaphoreIdleWaiters counts the goroutines of s's Client waiting for
// permits of s with no wake-up pending or in use (see IdleWaiters): tests
// wait for it before they release.
func SemaphoreIdleWaiters(s *Semaphore) int { return s.c.env.Hub.Idle(s.e.Channel(), false) }

// PlainSemaphoreIdleWaiters is SemaphoreIdleWaiters for a PlainSemaphore.
func PlainSemaphoreIdleWaiters(p *PlainSemaphore) int {
	return p.c.env.Hub.Idle(p.e.Channel(), false)
}
