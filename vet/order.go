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

// Message explains the inversion at its edge, names the edges that take
// the locks the other way round, and says how to fix it.
func (inv Inversion) Message() string {
	e := inv.At
	var b strings.Builder
	fmt.Fprintf(&b, "lock-order inversion: %s is taken%s while %s is held (taken at %s)", display(e.To), via(e), display(e.From), e.Held)
	if len(inv.Back) == 1 {
		r := inv.Back[0]
		fmt.Fprintf(&b, ", and %s is taken while %s is held at %s%s", display(r.To), display(r.From), r.At, via(r))
	} else {
		b.WriteString(", and the other way round")
		for i, r := range inv.Back {
			sep := ","
			if i == len(inv.Back)-1 {
				sep = " and"
			}
			fmt.Fprintf(&b, "%s %s while %s is held at %s%s", sep, display(r.To), display(r.From), r.At, via(r))
		}
	}
	locks := []string{display(e.From), display(e.To)}
	var sems []string
	for _, r := range append([]Edge{e}, inv.Back...) {
		if r.ToPermit {
			sems = append(sems, display(r.To))
		}
	}
	for _, r := range inv.Back[:len(inv.Back)-1] {
		locks = append(locks, display(r.To))
	}
	sort.Strings(locks)
	list := strings.Join(locks[:len(locks)-1], ", ") + " and " + locks[len(locks)-1]
	if len(sems) > 0 {
		// A semaphore cannot be a multi lock's member, and it blocks only
		// once its permits are all held: say so rather than suggest a
		// multi lock.
		sort.Strings(sems)
		fmt.Fprintf(&b, ": once every permit of %s is held by callers that wait for the other side, each caller waits for another until their wait times run out (a semaphore cannot be a multi lock member: take %s in the same order everywhere)", strings.Join(sems, " and "), list)
		return b.String()
	}
	if len(locks) == 2 {
		fmt.Fprintf(&b, ": two callers can each hold one and wait for the other until their wait times run out (take %s in one multi lock, which takes its members in key order, or take them in the same order everywhere)", list)
	} else {
		fmt.Fprintf(&b, ": %d callers can each hold one and wait for the next until their wait times run out (take %s in one multi lock, which takes its members in key order, or take them in the same order everywhere)", len(locks), list)
	}
	return b.String()
}

func via(e Edge) string {
	if e.Via == "" {
		return ""
	}
	return " (" + e.Via + ")"
}
