package mutex

import (
	"testing"
	"time"
)

// The claim of a granted lock, decided without Redis: a grant is claimed
// only while enough of its lease is left, counted from the waiter's last
// try; a lease cut to the waiter's record is claimed only by a watchdog
// hold, with the cut as all that is confirmed, and room for the first
// renewal after the next tick.
func TestGrantClaimable(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		name         string
		watchdog     bool
		px, cut, age time.Duration
		took         bool
		confirmed    time.Duration
		tick         time.Duration
	}{
		{"whole lease, fresh try", false, 30 * s, 30 * s, 10 * time.Millisecond, true, 0, 0},
		{"whole lease, try older than half the lease", false, 30 * s, 30 * s, 16 * s, false, 0, 0},
		{"cut fixed lease", false, 30 * s, 2 * s, 10 * time.Millisecond, false, 0, 0},
		{"cut watchdog lease, fresh try", true, 30 * s, 2 * s, 10 * time.Millisecond, true, 2 * s, 125 * time.Millisecond},
		{"cut watchdog lease, no room for the first renewal", true, 30 * s, 2 * s, 900 * time.Millisecond, false, 0, 125 * time.Millisecond},
		{"cut watchdog lease, just in time", true, 30 * s, 2 * s, 875 * time.Millisecond, true, 2 * s, 125 * time.Millisecond},
		{"cut longer than the lease", false, 10 * s, 20 * s, time.Second, true, 0, 0},
	} {
		took, confirmed := grantClaimable(c.watchdog, c.px, c.cut, c.age, c.tick)
		if took != c.took || confirmed != c.confirmed {
			t.Errorf("%s: took %v confirmed %v, want %v %v", c.name, took, confirmed, c.took, c.confirmed)
		}
	}
}
