package runtime

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestLeaseHeapPopsInDeadlineOrder(t *testing.T) {
	var q leaseHeap
	base := time.Now()
	var want []time.Time
	for range 1000 {
		at := base.Add(time.Duration(rand.IntN(10000)) * time.Millisecond)
		want = append(want, at)
		q.push(leaseEntry{at: at})
		if rand.IntN(4) == 0 { // interleave pops with pushes
			got := q.pop().at
			i := slices.IndexFunc(want, func(w time.Time) bool { return w.Equal(got) })
			for _, w := range want {
				if w.Before(got) {
					t.Fatalf("popped %v while %v was in the heap", got, w)
				}
			}
			want = slices.Delete(want, i, i+1)
		}
	}
	slices.SortFunc(want, func(a, b time.Time) int { return a.Compare(b) })
	for _, w := range want {
		if got := q.pop().at; !got.Equal(w) {
			t.Fatalf("popped %v, want %v", got, w)
		}
	}
	if len(q) != 0 {
		t.Fatalf("%d entries left", len(q))
	}
}
