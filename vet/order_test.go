package vet_test

import (
	"slices"
	"testing"

	"github.com/lockgen/lockgen/vet"
)

func at(line int) vet.Posn { return vet.Posn{File: "/nowhere/s.go", Line: line, Col: 2} }

// TestInversionNamesEveryEdgeOfALongerCycle: A→B, B→C, C→A is a deadlock
// of three callers; the report at A→B is a short message, and notes at
// the held lock and at each of the two edges back.
func TestInversionNamesEveryEdgeOfALongerCycle(t *testing.T) {
	edges := []vet.Edge{
		{From: "p/locks.A", To: "p/locks.B", At: at(1), Held: at(10)},
		{From: "p/locks.B", To: "p/locks.C", At: at(2), Held: at(20), Through: "p.f", ThroughAt: at(9)},
		{From: "p/locks.C", To: "p/locks.A", At: at(3), Held: at(30)},
		{From: "p/locks.A", To: "p/locks.D", At: at(4), Held: at(40)}, // no way back from D
	}
	invs := vet.Inversions(edges, func(e vet.Edge) bool { return e.At == at(1) || e.At == at(4) })
	if len(invs) != 1 {
		t.Fatalf("got %d inversions, want 1 (A→D closes no cycle): %+v", len(invs), invs)
	}
	want := "lock-order inversion: locks.B is taken while locks.A is held, and elsewhere the other way round through locks.C (take all 3 in one multi lock, or in one order everywhere)"
	if got := invs[0].Message(); got != want {
		t.Errorf("message:\n%s\nwant:\n%s", got, want)
	}
	wantNotes := []vet.Note{
		{At: at(10), Message: "locks.A is taken here"},
		{At: at(2), Message: "locks.C is taken while locks.B is held"},
		{At: at(9), Message: "through p.f, which takes locks.C here"},
		{At: at(3), Message: "locks.A is taken while locks.C is held: 3 callers can each hold one and wait for the next until their wait times run out"},
	}
	if got := invs[0].Notes(); !slices.Equal(got, wantNotes) {
		t.Errorf("notes:\n%q\nwant:\n%q", got, wantNotes)
	}
}

// TestNoInversionWithoutACycle: one order everywhere is clean, however
// many edges share it.
func TestNoInversionWithoutACycle(t *testing.T) {
	edges := []vet.Edge{
		{From: "p/locks.A", To: "p/locks.B", At: at(1)},
		{From: "p/locks.A", To: "p/locks.B", At: at(2)},
		{From: "p/locks.B", To: "p/locks.C", At: at(3)},
		{From: "p/locks.A", To: "p/locks.C", At: at(4)},
	}
	if invs := vet.Inversions(edges, func(vet.Edge) bool { return true }); len(invs) != 0 {
		t.Fatalf("inversions in a consistent order: %+v", invs)
	}
}
