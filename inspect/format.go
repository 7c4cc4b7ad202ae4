package inspect

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// WriteJSON writes v (an Instance, a list of them or of Summary) as
// indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// shown is a value as tables show it: as quoted has it, and Go-quoted
// too when a rune is not printable (strconv.IsPrint: a control character,
// an escape sequence, a line break or tab), so that a key, param or owner
// read from Redis can neither drive the terminal nor add or shift rows.
func shown(s string) string {
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return quoted(s)
}

// quoted is a key or param value as JSON carries it: as it is when it is
// UTF-8 and does not start with a double quote, else Go-quoted
// (strconv.Quote), as JSON cannot carry bytes that are not UTF-8 (it
// would write U+FFFD), and so that a quoted value is not taken for a
// plain one. A param value given to Inspector.Instance is unquoted alike.
func quoted(s string) string {
	if !utf8.ValidString(s) || strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	return s
}

// unquoted is quoted's inverse: false for a value that starts with a
// double quote but is not Go-quoted.
func unquoted(s string) (string, bool) {
	if !strings.HasPrefix(s, `"`) {
		return s, true
	}
	v, err := strconv.Unquote(s)
	return v, err == nil
}

// MarshalJSON writes st with its key, its channel (named after the key)
// and its param values as quoted has them.
func (st Instance) MarshalJSON() ([]byte, error) {
	type plain Instance // Instance without this method
	p := plain(st)
	p.Key, p.Channel = quoted(st.Key), quoted(st.Channel)
	if st.Params != nil {
		p.Params = make(map[string]string, len(st.Params))
		for n, v := range st.Params {
			p.Params[n] = quoted(v)
		}
	}
	return json.Marshal(p)
}

// human is a duration as people read it on a table: ms below a second,
// tenths of a second below a minute, whole seconds above.
func human(d Duration) string {
	t := time.Duration(d)
	switch {
	case d == NoExpiry:
		return "never"
	case t <= 0:
		return "0s"
	case t < time.Second:
		return t.Round(time.Millisecond).String()
	case t < time.Minute:
		return t.Round(100 * time.Millisecond).String()
	}
	return t.Round(time.Second).String()
}

// kindText is a kind as tables show it: a fenced reentrant lock says so.
func kindText(kind string, fenced bool) string {
	if fenced {
		return kind + ", fenced"
	}
	return kind
}

// describe says who an owner is.
func (w Who) describe() string {
	switch {
	case w.Redisson:
		return "redisson (no lockgen label)"
	case w.NoLabel:
		return "lockgen, no label (its Client is gone, or has not written it yet)"
	}
	s := fmt.Sprintf("lockgen pid %d on %s", w.PID, w.Host)
	if w.Name != "" {
		s += " (" + w.Name + ")"
	}
	return s
}

// WriteInstance writes one instance as an aligned table.
func WriteInstance(w io.Writer, st Instance) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	writeInstance(tw, st, "")
	return tw.Flush()
}

func writeInstance(tw *tabwriter.Writer, st Instance, indent string) {
	row := func(cells ...string) {
		for i, c := range cells {
			cells[i] = shown(c)
		}
		fmt.Fprintln(tw, indent+strings.Join(cells, "\t"))
	}
	row("lock", st.Lock+" ("+kindText(st.Kind, st.Fenced)+")")
	if st.Kind == "multi" {
		state := "not held"
		if st.Held {
			state = "held (every member)"
		}
		row("state", state)
		for _, m := range st.Members {
			writeInstance(tw, m, indent+"  ")
		}
		return
	}
	if st.Node != "" {
		row("node", st.Node)
	}
	if st.Key != "" {
		row("key", st.Key)
	}
	row("state", state(st))
	switch {
	case st.Token != nil:
		row("token", formatInt(*st.Token)+" (the last handed out)")
	case st.TokenUnreadable != "":
		row("token", "unreadable: "+st.TokenUnreadable)
	case st.Fenced:
		row("token", "none handed out yet")
	}
	for _, u := range st.Unreadable {
		row("unreadable", u)
	}
	for _, h := range st.Holders {
		what := fmt.Sprintf("×%d", h.Count)
		if h.Side != "" {
			what = h.Side + " " + what
		}
		if len(h.ReadTTLs) > 0 {
			ttls := make([]string, len(h.ReadTTLs))
			for i, t := range h.ReadTTLs {
				ttls[i] = human(t)
			}
			what += " (ttl " + strings.Join(ttls, ", ") + ")"
		}
		row("holder", h.Owner, what, h.Who.describe())
	}
	for i, q := range st.Queue {
		label := "waiter"
		if st.Kind == "readwrite" {
			label = "writer waits"
		}
		when := "deadline " + human(q.Deadline)
		if !q.Since.IsZero() {
			when = "waiting " + human(q.Waited) + ", " + when
		}
		row(fmt.Sprintf("%s %d", label, i+1), q.Owner, when, q.Who.describe())
	}
	for _, p := range st.Permits {
		owner := "owner unknown (no lockgen label matches: Redisson's, or its Client is gone)"
		if p.Who != nil {
			owner = p.Who.describe()
		}
		row("permit", p.ID, "ttl "+human(p.Expiry), owner)
	}
	// Waiters Redis does not record sleep on the channel: with no one
	// subscribed there, none waits (the JSON still says both).
	if st.Unrecorded != "" && (st.Listening == nil || *st.Listening > 0) {
		row("not recorded", st.Unrecorded)
	}
	if st.Listening != nil && *st.Listening > 0 {
		row("listening", plural(*st.Listening, "subscriber")+" on "+st.Channel)
	}
	for _, n := range st.Nodes {
		writeInstance(tw, n, indent+"  ")
	}
}

// state is the one-line state of an instance.
func state(st Instance) string {
	switch {
	case st.Kind == "latch" && st.Count != nil && *st.Count == 1:
		return "waiting for 1 count-down"
	case st.Kind == "latch" && st.Count != nil:
		return fmt.Sprintf("waiting for %d count-downs", *st.Count)
	case st.Kind == "latch":
		return "open (no count: not armed or counted down)"
	case st.Kind == "semaphore" && st.Free != nil:
		return fmt.Sprintf("%d free, %d held", *st.Free, len(st.Permits))
	case st.Kind == "semaphore":
		return "not set up (no permits yet)"
	case st.Kind == "red" && len(st.Nodes) > 0:
		held := 0
		for _, n := range st.Nodes {
			if n.Held {
				held++
			}
		}
		return fmt.Sprintf("held on %d of %d nodes", held, len(st.Nodes))
	case !st.Held:
		return "not held"
	case st.Mode != "":
		return "held for " + st.Mode + ", ttl " + human(st.TTL)
	}
	return "held, ttl " + human(st.TTL)
}

// WriteInstances writes a lock's live instances, one line each.
func WriteInstances(w io.Writer, list []Instance, truncated bool, limit int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tKEY\tPARAMS\tSTATE\tOWNERS\tWAITING")
	for _, st := range list {
		owners := make([]string, len(st.Holders))
		for i, h := range st.Holders {
			owners[i] = shown(h.Who.short())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", st.Lock, shown(st.Key), paramText(st.Params), shown(state(st)), strings.Join(owners, ", "), len(st.Queue))
	}
	if truncated {
		fmt.Fprintf(tw, "… more than %d: raise -limit to see them\n", limit)
	}
	return tw.Flush()
}

// plural is n things.
func plural(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return formatInt(n) + " " + thing + "s"
}

// short names an owner in one word: pid@host, redisson, or lockgen (no
// label).
func (w Who) short() string {
	switch {
	case w.Redisson:
		return "redisson"
	case w.NoLabel:
		return "lockgen"
	}
	return fmt.Sprintf("%d@%s", w.PID, w.Host)
}

func paramText(params map[string]string) string {
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		names[i] = n + "=" + shown(params[n])
	}
	return strings.Join(names, " ")
}

// WriteSummary writes the one-line-per-lock summary.
func WriteSummary(w io.Writer, list []Summary, limit int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tKIND\tKEY\tLIVE\tWAITING")
	for _, s := range list {
		live := fmt.Sprint(s.Live)
		switch {
		case s.Error != "":
			live = "?"
		case s.Live < 0:
			live = "-"
		case s.Truncated:
			live = fmt.Sprintf("%d+", limit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", s.Lock, kindText(s.Kind, s.Fenced), shown(s.Pattern), live, s.Waiting)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range list {
		if s.Error != "" {
			fmt.Fprintf(w, "%s: not read: %s\n", s.Lock, shown(s.Error))
		}
	}
	return nil
}
