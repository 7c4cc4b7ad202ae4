package leaseclock

import "time"

// base is the origin of the lease clock's scale (Nanos).
var base = time.Now()

// Nanos is t on the scale the queues, the renewal wheel and the
// watchdog's rounds keep times in: nanoseconds since the process started,
// on the monotonic clock (as Go's timers), so a wall clock step moves no
// deadline.
func Nanos(t time.Time) int64 { return int64(t.Sub(base)) }

// Time is the time n stands for (Nanos), with a monotonic reading.
func Time(n int64) time.Time { return base.Add(time.Duration(n)) }
