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
