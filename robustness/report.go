package robustness

// The report: what a run did and what the checkers found, for a person.
// Times are in ms from the history's first event, the one clock every
// process shares (CLOCK_MONOTONIC).

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report writes a plain-text summary of a run: its seed and length, when
// the faults healed, the operations by kind, function and outcome, the
// faults by type, and each check's verdict with its notes.
func Report(w io.Writer, h *History, results []Result) {
	fmt.Fprintf(w, "seed %d, run %s long (%d processes, %d ops), healed at %s\n",
		h.Seed, dur(h.Finish-h.Begin), len(h.Processes), len(h.Ops), healedAt(h))

	type row struct{ kind, f string }
	counts := map[row]map[string]int{}
	shared, clients := 0, map[string]bool{}
	for _, o := range h.Ops {
		if o.Shared != "" {
			shared++
			clients[fmt.Sprintf("%s#%d", o.Shared, o.Client)] = true
		}
		r := row{o.Kind, o.F}
		if counts[r] == nil {
			counts[r] = map[string]int{}
		}
		out := o.Outcome
		if o.Return == Never {
			out = "never"
		}
		counts[r][out]++
	}
	rows := make([]row, 0, len(counts))
	for r := range counts {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.f, b.f)) })
	if shared > 0 {
		fmt.Fprintf(w, "%d ops on %d shared Clients (goroutines of a process sharing one)\n", shared, len(clients))
	}
	fmt.Fprintln(w, "\noperations")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tf\tok\tfail\tunknown\tnever returned\t")
	for _, r := range rows {
		c := counts[r]
		kind := r.kind
		if kind == "" {
			kind = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t\n", kind, r.f, c[OutOK], c[OutFail], c[OutUnknown], c["never"])
	}
	_ = tw.Flush()

	type agg struct {
		n     int
		total int64
	}
	faults := map[string]*agg{}
	for _, fl := range h.Faults {
		a := faults[fl.Type]
		if a == nil {
			a = &agg{}
			faults[fl.Type] = a
		}
		a.n++
		a.total += min(fl.End, h.Finish) - fl.Start
	}
	fmt.Fprintln(w, "\nfaults")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\tcount\ttotal\t")
	for _, typ := range sortedKeys(faults) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t\n", typ, faults[typ].n, dur(faults[typ].total))
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\nchecks")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range results {
		verdict := "PASS"
		if !r.OK() {
			verdict = "FAIL"
		} else if r.Checked == 0 {
			verdict = "PASS (nothing checked)"
		}
		fmt.Fprintf(tw, "%s\tchecked %d\tviolations %d\t%s\n", r.Check, r.Checked, len(r.Violations), verdict)
	}
	_ = tw.Flush()
	for _, r := range results {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  %s: %s\n", r.Check, n)
		}
	}
	for _, r := range results {
		for _, v := range r.Violations {
			fmt.Fprintf(w, "VIOLATION %s: %s\n", r.Check, v.Msg)
		}
	}
}

func healedAt(h *History) string {
	if h.Healed == 0 {
		return "- (no fault healed)"
	}
	return relMS(h, h.Healed)
}

// Window writes the minimal window of the history around a violation:
// every op on the violation's key(s) and every fault (and process start
// or exit) that overlaps [v.From-margin, v.To+margin], one line each, in
// order of time.
func Window(w io.Writer, h *History, v Violation, margin time.Duration) {
	if v.From == 0 && v.To == 0 {
		fmt.Fprintln(w, "  (no window: the violation is not about a time of the history)")
		return
	}
	from, to := v.From-int64(margin), plus(v.To, margin)
	keys := map[string]bool{}
	for _, o := range v.Ops {
		for _, k := range append(opKeys(o), o.Key) {
			keys[k] = true
		}
	}
	type line struct {
		t    int64
		text string
	}
	var lines []line
	for _, o := range h.Ops {
		touches := false
		for _, k := range append(opKeys(o), o.Key) {
			touches = touches || keys[k]
		}
		if !touches || o.Invoke > to || opLast(h, o) < from {
			continue
		}
		lines = append(lines, line{o.Invoke, describeForWindow(h, o, slices.Contains(v.Ops, o))})
	}
	for _, fl := range h.Faults {
		if fl.Start > to || min(fl.End, h.Finish) < from {
			continue
		}
		lines = append(lines, line{fl.Start, fmt.Sprintf("%s..%s  fault %s on %s", relMS(h, fl.Start), relMS(h, fl.End), fl.Type, fl.Target)})
	}
	for _, p := range h.Processes {
		if p.Start >= from && p.Start <= to {
			lines = append(lines, line{p.Start, fmt.Sprintf("%s  process p%d started", relMS(h, p.Start), p.Proc)})
		}
		if p.Exit >= from && p.Exit <= to {
			text := fmt.Sprintf("%s  process p%d exited", relMS(h, p.Exit), p.Proc)
			if p.Err != "" {
				text += ": " + p.Err
			}
			lines = append(lines, line{p.Exit, text})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.t, b.t) })
	fmt.Fprintf(w, "  window %s..%s, keys %s:\n", relMS(h, from), relMS(h, to), strings.Join(sortedKeys(keys), ","))
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l.text)
	}
}

// opLast is the last time op o was seen: its return, its hold's end, its
// release's return or its last write's.
func opLast(h *History, o *Op) int64 {
	last := o.Return
	if last == Never {
		return h.Finish
	}
	for _, t := range []int64{o.Done, o.ReleaseInvoke, o.ReleaseReturn} {
		if t != Never {
			last = max(last, t)
		}
	}
	for _, wr := range o.Writes {
		last = max(last, min(wr.Return, h.Finish))
	}
	return last
}

// describeForWindow renders op o on one line: its call, and for a hold
// its end and writes. A star marks the violation's own ops.
func describeForWindow(h *History, o *Op, own bool) string {
	var b strings.Builder
	if own {
		b.WriteString("* ")
	}
	fmt.Fprintf(&b, "%s..%s  %s", relMS(h, o.Invoke), relMS(h, o.Return), opName(o))
	if o.Shared != "" {
		fmt.Fprintf(&b, " [g%d on shared Client %s#%d]", o.G, o.Shared, o.Client)
	}
	if o.N != 0 {
		fmt.Fprintf(&b, " n=%d", o.N)
	}
	if o.Wait != 0 {
		fmt.Fprintf(&b, " wait=%v", time.Duration(o.Wait))
	}
	if o.Lease != 0 {
		fmt.Fprintf(&b, " lease=%v", time.Duration(o.Lease))
	}
	fmt.Fprintf(&b, " -> %s", o.Outcome)
	if o.Err != "" {
		fmt.Fprintf(&b, " (%s)", o.Err)
	}
	if o.Done != Never {
		fmt.Fprintf(&b, "; done %s (%s)", relMS(h, o.Done), o.Cause)
	}
	if o.ReleaseInvoke != Never {
		fmt.Fprintf(&b, "; release %s..%s", relMS(h, o.ReleaseInvoke), relMS(h, o.ReleaseReturn))
		if o.ReleaseErr != "" {
			fmt.Fprintf(&b, " (%s)", o.ReleaseErr)
		}
	}
	if exit := h.Exit(o.Proc); exit != Never && o.Holds() && exit < o.End(Never) {
		fmt.Fprintf(&b, "; process exited %s", relMS(h, exit))
	}
	for _, wr := range o.Writes {
		fmt.Fprintf(&b, "; write %s..%s read %d %s", relMS(h, wr.Invoke), relMS(h, wr.Return), wr.Read, wr.Outcome)
	}
	return b.String()
}

// WriteArtifacts writes what a failed run leaves for a person to look at
// into dir: history.json (the whole History, to rerun the checkers on,
// see ReadHistory), report.txt (Report and the window of each violation)
// and the visualizations of non-linearizable partitions (copied from
// where CheckLinearizable wrote them). It returns the paths written.
func WriteArtifacts(dir string, h *History, results []Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	hp := filepath.Join(dir, "history.json")
	f, err := os.Create(hp)
	if err != nil {
		return nil, err
	}
	err = json.NewEncoder(f).Encode(h)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	paths = append(paths, hp)

	var b strings.Builder
	Report(&b, h, results)
	for _, r := range results {
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "\n%s: %s\n", r.Check, v.Msg)
			Window(&b, h, v, 500*time.Millisecond)
		}
	}
	rp := filepath.Join(dir, "report.txt")
	if err := os.WriteFile(rp, []byte(b.String()), 0o644); err != nil {
		return paths, err
	}
	paths = append(paths, rp)

	// Visualizations written elsewhere (the run's own directory) are
	// copied in; those written here already are listed.
	for _, r := range results {
		for _, v := range r.Violations {
			for _, src := range v.Files {
				dst := filepath.Join(dir, filepath.Base(src))
				if sameFile(src, dst) {
					continue
				}
				b, err := os.ReadFile(src)
				if err == nil {
					err = os.WriteFile(dst, b, 0o644)
				}
				if err != nil {
					return paths, err
				}
			}
		}
	}
	html, err := filepath.Glob(filepath.Join(dir, "linear-*.html"))
	if err != nil {
		return paths, err
	}
	slices.Sort(html)
	return append(paths, html...), nil
}

// sameFile reports whether a and b are one file.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// ReadHistory reads a history.json written by WriteArtifacts.
func ReadHistory(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &h, nil
}
