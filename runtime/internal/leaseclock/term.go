package leaseclock

import "time"

// Drift is the margin taken off a lease before the holder is told its
// hold may be gone: clock rates differ (Redisson's 1%), and the clock
// goroutine may run late on a busy process (Redisson's 2 ms, raised to 5).
func Drift(lease time.Duration) time.Duration {
	return lease/100 + 5*time.Millisecond
}

// A Term is what one hold counts on in Redis.
type Term struct {
	End   time.Time // the latest expiry a confirmed request set (send + lease): not to be cut short
	Valid time.Time // the deadline: the hold's ctx ends there unless a confirmation moves it
}

// Confirm records that a request sent at sent, its reply read at now,
// made Redis keep the key for at least lease. It reports whether this was
// the first confirmation (the caller then puts the hold on the clock); one
// after the deadline passed never revives the hold.
func (t *Term) Confirm(sent time.Time, lease time.Duration, now time.Time) (first bool) {
	if end := sent.Add(lease); end.After(t.End) {
		t.End = end
	}
	valid := sent.Add(lease - Drift(lease))
	if !valid.After(t.Valid) {
		return false
	}
	first = t.Valid.IsZero()
	if !first && !now.Before(t.Valid) {
		return false
	}
	t.Valid = valid
	return first
}

// Left is the least lease a request sent at now may apply without cutting
// short an expiry the hold counts on.
func (t *Term) Left(now time.Time) time.Duration { return t.End.Sub(now) }
