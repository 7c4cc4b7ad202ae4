package leaseclock

import "time"

// base is the origin of the lease clock's scale (Nanos).
var base = time.Now()

// Nanos is t on the lease clock's scale, the one its queues, the renewal
// wheel and the watchdog's rounds keep deadlines and due times in:
// nanoseconds since the process started, read on the monotonic clock
// (every time derived from time.Now carries a reading of it). A step of
// the wall clock (NTP, an operator) then moves no deadline: with Unix
// time a step back of d kept every watchdog hold's ctx alive d past its
// deadline, while Redis expired the key on time. Go's timers, and so the
// deadlines of fixed-lease holds, run on the same clock.
func Nanos(t time.Time) int64 { return int64(t.Sub(base)) }

// Time is the time n stands for on the lease clock's scale (Nanos), with
// a monotonic reading.
func Time(n int64) time.Time { return base.Add(time.Duration(n)) }
