package robustness

import (
	"slices"
	"testing"
)

// TestShareGroups checks how goroutines are put on Clients: each its own,
// every n on one, or drawn per process with both kinds in a run.
func TestShareGroups(t *testing.T) {
	if got := shareGroups(1, 0, 3, -1); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("sharing -1: %v, want each goroutine its own Client", got)
	}
	if got := shareGroups(1, 0, 5, 2); !slices.Equal(got, []int{0, 0, 1, 1, 2}) {
		t.Errorf("sharing 2: %v, want pairs", got)
	}
	own, shared := 0, 0
	for seed := range int64(50) {
		for proc := range 4 {
			got := shareGroups(seed, proc, 3, 0)
			if !slices.Equal(got, shareGroups(seed, proc, 3, 0)) {
				t.Fatalf("seed %d proc %d: not the same draw twice", seed, proc)
			}
			if got[0] != 0 || !slices.IsSorted(got) {
				t.Fatalf("seed %d proc %d: groups %v not numbered in order", seed, proc, got)
			}
			if got[1] == 0 {
				shared++
			} else {
				own++
			}
		}
	}
	if own == 0 || shared == 0 {
		t.Errorf("drawn over 200 processes: %d with a shared Client, %d without: want both", shared, own)
	}
}
