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

// suggestParams maps each undeclared placeholder of one pattern to the
// param it most likely means, among the names written under params that
// the pattern does not use yet (a name whose type was refused counts: that
// is reported at the type). A placeholder with no likely param is absent,
// and its error asks to declare it.
//
// A param is likely when it is the placeholder in another case (orderID
// for ${orderId}), else one edit away (orderID for ${ordrID}), else whole
// words apart (sku for ${skuID}, toAccount for ${to}); and when the two
// are each other's only closest match: two placeholders cannot both mean
// one param, and a placeholder near two params names neither.
func suggestParams(placeholders, params []string, used map[string]bool) map[string]string {
	var free []string
	for _, p := range params {
		if !used[p] {
			free = append(free, p)
		}
	}
	out := map[string]string{}
	for _, ph := range placeholders {
		p, ok := closest(ph, free)
		if !ok {
			continue
		}
		if back, ok := closest(p, placeholders); ok && back == ph {
			out[ph] = p
		}
	}
	return out
}

// closest returns the only name of names nearest to x by nameRank, and
// false when none is near or two are equally near.
func closest(x string, names []string) (string, bool) {
	best, bestRank, ties := "", -1, 0
	for _, n := range names {
		r := nameRank(x, n)
		switch {
		case r < 0:
		case bestRank < 0 || r < bestRank:
			best, bestRank, ties = n, r, 1
		case r == bestRank:
			ties++
		}
	}
	return best, bestRank >= 0 && ties == 1
}

// nameRank says how near two identifiers are, the nearer the lower: 0 the
// same but for case, 1 one edit apart (3 letters or more), 2 whole words
// apart (wordsApart); -1 not near.
func nameRank(a, b string) int {
	la, lb := strings.ToLower(a), strings.ToLower(b)
	switch {
	case la == lb:
		return 0
	case min(len(a), len(b)) >= 3 && distance(la, lb) == 1:
		return 1
	case wordsApart(a, b):
		return 2
	}
	return -1
}

// wordsApart reports whether one of a and b is the other with whole words
// added at its start or end, ignoring case: skuID and sku, id and orderID,
// sku_id and sku. A word starts at a lower-to-upper change or an
// underscore; an acronym's end is not read as one (IDs is not I+Ds).
func wordsApart(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(a) < 2 || len(a) == len(b) {
		return false
	}
	la, lb := strings.ToLower(a), strings.ToLower(b)
	return strings.HasPrefix(lb, la) && wordStart(b, len(a)) ||
		strings.HasSuffix(lb, la) && wordStart(b, len(b)-len(a))
}

// wordStart reports whether a new word of the identifier s starts at byte
// i (0 < i < len(s)).
func wordStart(s string, i int) bool {
	lower := func(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
	upper := func(c byte) bool { return 'A' <= c && c <= 'Z' }
	prev, c := s[i-1], s[i]
	return prev == '_' || c == '_' || lower(prev) && upper(c)
}
