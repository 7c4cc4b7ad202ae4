package templates

import (
	"strconv"
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
	return " for " + andList(names)
}

// andList joins names as prose: "a", "a and b", "a, b and c".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
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
// reviews it: kind, key pattern (a multi lock's members), lease, wait
// time, the kind's own settings (extra, made with configLine) and the
// replicas an acquisition waits for.
func configLines(l *Lock, extra ...string) []string {
	lines := []string{"", configLine("kind", l.Kind)}
	if l.Kind == "multi" {
		lines = append(lines, memberLines(l)...)
	} else {
		lines = append(lines, configLine("key", l.Key))
	}
	if l.Kind != "latch" {
		lines = append(lines, configLine("lease", leaseText(l.Lease)))
	}
	lines = append(lines, configLine("waitTime", waitText(l.WaitTime)))
	lines = append(lines, extra...)
	if l.SyncReplicas > 0 {
		lines = append(lines, configLine("replicas", strconv.Itoa(l.SyncReplicas)+" must acknowledge each acquisition, else it is undone (syncReplicas)"))
	}
	return lines
}

// configLine is one line of the config block: the label and its value,
// in a column. An empty label continues the line above.
func configLine(label, value string) string {
	if label == "" {
		return "\t" + strings.Repeat(" ", 10) + value
	}
	return "\t" + label + ":" + strings.Repeat(" ", max(1, 9-len(label))) + value
}

// memberLines lists a multi lock's members in the config block: name,
// key, and what differs from a plain reentrant lock.
func memberLines(l *Lock) []string {
	width := 0
	for _, m := range l.Members {
		width = max(width, len(m.Name))
	}
	lines := make([]string, len(l.Members))
	for i, m := range l.Members {
		var notes []string
		switch m.Kind {
		case "fair":
			notes = append(notes, "fair")
		case "readwrite":
			notes = append(notes, "readwrite: write side")
		}
		if m.SyncReplicas > 0 {
			notes = append(notes, "syncReplicas "+strconv.Itoa(m.SyncReplicas))
		}
		text := m.Name + strings.Repeat(" ", width-len(m.Name)+2) + m.Key
		if len(notes) > 0 {
			text += " (" + strings.Join(notes, ", ") + ")"
		}
		label := ""
		if i == 0 {
			label = "members"
		}
		lines[i] = configLine(label, text)
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
