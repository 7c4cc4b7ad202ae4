package templates

import (
	"strings"
	"time"
)

// for_ names the params a lock is taken for: " for orderID", " for tenant and day".
func for_(l *Lock) string {
	if len(l.Params) == 0 {
		return ""
	}
	names := make([]string, len(l.Params))
	for i, p := range l.Params {
		names[i] = p.Name
	}
	if len(names) == 1 {
		return " for " + names[0]
	}
	return " for " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// waitSentence says how a With<Name> call waits.
func waitSentence(d time.Duration) string {
	switch {
	case d < 0:
		return "It waits for the lock until ctx is done, and releases it when fn returns."
	case d == 0:
		return "It tries once (runtime.ErrNotAcquired if taken), and releases the lock when fn returns."
	}
	return "It waits up to " + d.String() + " for the lock, and releases it when fn returns."
}

// docBlock is the spec's doc, set off by blank comment lines.
func docBlock(l *Lock) []string {
	lines := docLines(l.Doc)
	if len(lines) == 0 {
		return nil
	}
	return append([]string{""}, lines...)
}

// configLines is the lock's configuration as a code block, so that go doc
// reviews it: kind, key pattern, lease, wait time and, for the kinds that
// have one, the fairness setting.
func configLines(l *Lock, fairness string) []string {
	lines := []string{
		"",
		"\tkind:     " + l.Kind,
		"\tkey:      " + l.Key,
		"\tlease:    " + leaseText(l.Lease),
		"\twaitTime: " + waitText(l.WaitTime),
	}
	if fairness != "" {
		lines = append(lines, "\tfairness: "+fairness)
	}
	return lines
}

// lines joins groups of comment lines.
func lines(groups ...[]string) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}
