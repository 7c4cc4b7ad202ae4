package lockgen

import (
	"strconv"
	"strings"
)

// suggest returns the candidate closest to got, or "" when none is close
// enough to be a plausible typo. Case differences are nearly free, so
// "WaitTime" suggests "waitTime".
func suggest(got string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := distance(strings.ToLower(got), strings.ToLower(c))
		if d > max(1, len(c)/3) {
			continue
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// didYouMean formats a suggestion as a fix: ` (did you mean "x"?)` or,
// with no close candidate, the list of valid values.
func didYouMean(got string, candidates []string) string {
	if s := suggest(got, candidates); s != "" {
		return "did you mean " + strconv.Quote(s) + "?"
	}
	return "use one of " + strings.Join(candidates, ", ")
}

// distance is the Levenshtein distance between a and b, over bytes; the
// inputs are field names and type names, so that is enough.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
