package holds

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A round goes out by slot, then in the order the holds were made, each
// hold once.
func TestSortDuePutsARoundInSlotThenWriteOrder(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 1000} {
		var due []Due
		for i := range n {
			due = append(due, Due{H: &Hold{}, Seq: uint64(1000 + i), Slot: rand.IntN(3)})
		}
		rand.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
		holds := make(map[*Hold]Due)
		for _, u := range due {
			holds[u.H] = u
		}
		keys := SortDue(due, nil)
		if !slices.IsSortedFunc(due, func(a, b Due) int {
			if a.Slot != b.Slot {
				return a.Slot - b.Slot
			}
			return int(a.Seq) - int(b.Seq)
		}) {
			t.Fatalf("%d holds: not in slot, then write order", n)
		}
		for _, u := range due {
			if v, ok := holds[u.H]; !ok || v.Seq != u.Seq || v.Slot != u.Slot {
				t.Fatalf("%d holds: a hold lost its Due or came twice", n)
			}
			delete(holds, u.H)
		}
		if len(keys) != n {
			t.Fatalf("%d keys of scratch for %d holds", len(keys), n)
		}
	}
}

func TestUrgentFirstKeepsEachPartsOrder(t *testing.T) {
	valid := []int64{50, 5, 60, 7, 70, 1}
	due := make([]Due, len(valid))
	for i, v := range valid {
		due[i] = Due{Valid: v, Seq: uint64(i)}
	}
	n, scratch := UrgentFirst(due, 10, nil)
	var got []uint64
	for _, u := range due {
		got = append(got, u.Seq)
	}
	if want := []uint64{1, 3, 5, 0, 2, 4}; n != 3 || !slices.Equal(got, want) {
		t.Fatalf("n=%d order %v, want 3 %v", n, got, want)
	}
	if len(scratch) != 0 {
		t.Fatalf("scratch returned with %d holds", len(scratch))
	}
	if n, _ := UrgentFirst(due[3:], 10, scratch); n != 0 {
		t.Fatalf("%d urgent among holds with time", n)
	}
}

// The urgent holds are cut into groups whose holds have at most twice the
// time left of the group's first (or 1 ms more), shortest first; those
// out of time come first, to be left unsent; each group is in SortDue's
// order; no hold is lost or doubled.
func TestByTimeLeftGroupsHoldsWithinTwiceTheEarliestsTimeLeft(t *testing.T) {
	const ms = int64(1e6)
	now := int64(1_000_000) * ms
	for _, n := range []int{0, 1, 2, 50, 1000} {
		var due []Due
		for i := range n {
			left := rand.Int64N(400*ms) - 20*ms // some out of time
			due = append(due, Due{H: &Hold{}, Valid: now + left, Seq: uint64(i), Slot: rand.IntN(3)})
		}
		seen := make(map[*Hold]bool, n)
		for _, u := range due {
			seen[u.H] = true
		}
		ends, _ := ByTimeLeft(due, now, nil, nil)
		if len(ends) == 0 || ends[len(ends)-1] != n && n > 0 || n == 0 && ends[0] != 0 {
			t.Fatalf("%d holds: groups end at %v", n, ends)
		}
		for _, u := range due[:ends[0]] {
			if u.Valid > now {
				t.Fatalf("%d holds: one with %v left is in the out-of-time group", n, u.Valid-now)
			}
		}
		for i := 1; i < len(ends); i++ {
			g := due[ends[i-1]:ends[i]]
			if len(g) == 0 {
				t.Fatalf("%d holds: group %d empty", n, i)
			}
			least, most := g[0].Valid, g[0].Valid
			for _, u := range g {
				least, most = min(least, u.Valid), max(most, u.Valid)
			}
			if least <= now || most-now > max(2*(least-now), least-now+ms) {
				t.Fatalf("%d holds: group %d has %v to %v left", n, i, least-now, most-now)
			}
			if i > 1 && due[ends[i-2]].Valid > least {
				t.Fatalf("%d holds: group %d has less time left than the one before it", n, i)
			}
			if !slices.IsSortedFunc(g, func(a, b Due) int {
				if a.Slot != b.Slot {
					return a.Slot - b.Slot
				}
				return int(a.Seq) - int(b.Seq)
			}) {
				t.Fatalf("%d holds: group %d not in slot, then write order", n, i)
			}
		}
		for _, u := range due {
			if !seen[u.H] {
				t.Fatalf("%d holds: a hold came twice or from nowhere", n)
			}
			delete(seen, u.H)
		}
	}
}
