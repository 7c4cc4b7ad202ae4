package runtime

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestLeaseHeapKeepsDeadlineOrderThroughRemovals(t *testing.T) {
	var q leaseHeap
	base := time.Now()
	var in []*hold
	for range 2000 {
		h := &hold{clockAt: base.Add(time.Duration(rand.IntN(10000)) * time.Millisecond)}
		q.push(h)
		in = append(in, h)
		if rand.IntN(3) == 0 { // a release: leaves from anywhere
			i := rand.IntN(len(in))
			if got := q.removeAt(in[i].clockIdx); got != in[i] {
				t.Fatal("removeAt took another hold")
			}
			in = slices.Delete(in, i, i+1)
		}
		for i, h := range q {
			if h.clockIdx != i {
				t.Fatalf("entry %d says it is at %d", i, h.clockIdx)
			}
		}
	}
	slices.SortFunc(in, func(a, b *hold) int { return a.clockAt.Compare(b.clockAt) })
	for _, want := range in {
		if got := q.removeAt(0); !got.clockAt.Equal(want.clockAt) {
			t.Fatalf("earliest = %v, want %v", got.clockAt, want.clockAt)
		}
	}
	if len(q) != 0 {
		t.Fatalf("%d entries left", len(q))
	}
}
