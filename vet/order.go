package vet

import (
	"fmt"
	"sort"
	"strings"
)

// Inversion is a cycle in the lock order, seen from one of its edges: At
// takes At.To while At.From is held, and Back takes the locks the other
// way round, from At.To back to At.From.
type Inversion struct {
	At   Edge
	Back []Edge
}

// Inversions returns, for every edge of all for which want is true, the
// cycle it closes, if any: the shortest path of edges back from its To to
// its From.
func Inversions(all []Edge, want func(Edge) bool) []Inversion {
	out := make(map[string][]Edge)
	for _, e := range all {
		out[e.From] = append(out[e.From], e)
	}
	var invs []Inversion
	for _, e := range all {
		if !want(e) {
			continue
		}
		if back := shortestPath(out, e.To, e.From); back != nil {
			invs = append(invs, Inversion{At: e, Back: back})
		}
	}
	return invs
}

// shortestPath is a breadth-first search over the lock graph; it visits
// locks in a fixed order so the path it returns is deterministic.
func shortestPath(out map[string][]Edge, from, to string) []Edge {
	prev := map[string]Edge{}
	seen := map[string]bool{from: true}
	queue := []string{from}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, e := range out[n] {
			if seen[e.To] {
				continue
			}
			seen[e.To] = true
			prev[e.To] = e
			if e.To == to {
				var path []Edge
				for at := to; at != from; at = prev[at].From {
					path = append([]Edge{prev[at]}, path...)
				}
				return path
			}
			queue = append(queue, e.To)
		}
	}
	return nil
}

// Message is the finding at the inversion's edge: what it takes while
// it holds what, and the fix. Notes give the positions.
func (inv Inversion) Message() string {
	e := inv.At
	other := "elsewhere the other way round"
	if len(inv.Back) > 1 { // a cycle of three locks or more
		others := make([]string, 0, len(inv.Back)-1)
		for _, r := range inv.Back[:len(inv.Back)-1] {
			others = append(others, display(r.To))
		}
		other += " through " + andList(others)
	}
	fix, _ := inv.advice()
	return fmt.Sprintf("lock-order inversion: %s is taken while %s is held, and %s (%s)", display(e.To), display(e.From), other, fix)
}

// Notes are the positions of the inversion: where its edge's held lock
// was taken, and the edges back, the last with why the cycle deadlocks.
func (inv Inversion) Notes() []Note {
	e := inv.At
	notes := []Note{{e.Held, display(e.From) + " is taken here"}}
	if e.Through != "" {
		notes = append(notes, Note{e.ThroughAt, "through " + e.Through + ", which takes " + display(e.To) + " here"})
	}
	_, why := inv.advice()
	for i, r := range inv.Back {
		msg := display(r.To) + " is taken while " + display(r.From) + " is held"
		if i == len(inv.Back)-1 {
			msg += ": " + why
		}
		notes = append(notes, Note{r.At, msg})
		if r.Through != "" {
			notes = append(notes, Note{r.ThroughAt, "through " + r.Through + ", which takes " + display(r.To) + " here"})
		}
	}
	return notes
}

// advice is the fix for the inversion, and why its cycle deadlocks.
func (inv Inversion) advice() (fix, why string) {
	locks, sems := inv.locks()
	switch {
	case len(sems) > 0:
		// A semaphore cannot be a multi lock's member, and it blocks only
		// once its permits are all held: say so rather than suggest a
		// multi lock.
		return "take " + andList(locks) + " in one order everywhere: a semaphore cannot be a multi lock member",
			"once every permit of " + andList(sems) + " is held by callers that wait for the other side, each waits for another until their wait times run out"
	case len(locks) == 2:
		return "take both in one multi lock, or in one order everywhere",
			"two callers can each hold one and wait for the other until their wait times run out"
	}
	// The message names every lock of the cycle already.
	return fmt.Sprintf("take all %d in one multi lock, or in one order everywhere", len(locks)),
		fmt.Sprintf("%d callers can each hold one and wait for the next until their wait times run out", len(locks))
}

// locks are the cycle's locks, sorted, and those of them that are semaphores.
func (inv Inversion) locks() (locks, sems []string) {
	e := inv.At
	locks = []string{display(e.From), display(e.To)}
	for _, r := range inv.Back[:len(inv.Back)-1] {
		locks = append(locks, display(r.To))
	}
	seen := make(map[string]bool)
	for _, r := range append([]Edge{e}, inv.Back...) {
		if r.ToPermit && !seen[r.To] {
			seen[r.To] = true
			sems = append(sems, display(r.To))
		}
	}
	sort.Strings(locks)
	sort.Strings(sems)
	return locks, sems
}

// andList joins names as prose: a, b and c.
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
