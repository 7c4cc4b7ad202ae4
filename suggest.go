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

// distance is the edit distance between a and b where swapping two
// adjacent bytes counts as one edit (optimal string alignment), over
// bytes: the inputs are short field and type names.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// Suggest returns the candidate closest to got, or "" when none is close
// enough to be a plausible typo ("WaitTime" suggests "waitTime"). lockgen
// uses it for spec fields and values; the command uses it for its own
// commands and flags.
func Suggest(got string, candidates []string) string {
	return suggest(got, candidates)
}
