package robustness

// The linearizability checker: porcupine over small sequential models,
// one partition per kind and key.
//
// Models (the state is an int64; porcupine explores sets of them, since
// an op whose outcome is unknown may or may not have taken effect):
//
//   - latch (RCountDownLatch): the count, 0 when absent (a latch that
//     reached zero is deleted). set-count(N): ok iff 0, then N; fail iff >
//     0. count-down: -1 if > 0 (a latch not armed is not armed by it).
//     count: reads it. await: ok iff 0 at its linearization point, fail
//     (not released within its wait) iff > 0.
//   - plain semaphore (RSemaphore): the free count, -1 when absent.
//     set-count(N) is TrySetPermits: ok iff absent, then N; fail iff
//     present. acquire(N): ok iff present and >= N, then -N; fail iff
//     absent or < N. release(N): +N, or N when absent (the release script
//     INCRBYs, creating the key: lua/plain_semaphore_release.lua).
//     available: reads it, 0 when absent. An acquire abandoned at its
//     deadline (a go-redis client that does not honour deadlines on
//     reads: the error says "no reply by the end of the call") may also
//     take its permits for a while: its late reply takes them, and the
//     runtime gives them back (runtime/late.go). The state then owes a
//     give-back, which a synthetic op of unknown outcome applies at any
//     time after the acquire's invoke, or never (the process was killed):
//     the state is the free count and the permits owed (plainState).
//   - fenced register (the storage's, from the writes of fenced holds):
//     the last accepted token. write(t): ok iff t >= last, then t; fail
//     (refused) iff t < last.
//
// Faults: every FLUSHALL of the lock server is an op "flush" (state:
// absent) in each latch and plain-semaphore partition. The register lives
// in the storage server, which is never faulted. A restart is no op of
// the models: the lock server fsyncs its append-only file before each
// reply (appendfsync always, run.go), so it forgets nothing acknowledged,
// and a write whose reply the restart cut is an op of unknown outcome
// anyway. Forgetting is what FLUSHALL models.
//
// Unknown outcomes: an op whose outcome is unknown (or that never
// returned) may take effect at any time after its invoke, even after its
// error came back (a request in flight is still delivered), or never: its
// return is the end of the history and its step allows both effects. A
// read whose outcome is unknown constrains nothing and is left out, as is
// a plain acquire that failed before it could take permits (ErrClosed or
// its ctx done while waiting: runtime/wait.go sends no try then, and a try
// that may have reached Redis reports ErrOutcomeUnknown).
//
// A partition porcupine cannot decide within LinearizabilityTimeout is a
// note, not a violation.

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// LinearizabilityTimeout bounds porcupine's search per partition.
var LinearizabilityTimeout = 10 * time.Second

// The model's own function names, besides the F* ones.
const (
	linFlush    = "flush"
	linWrite    = "write"
	linGiveBack = "give-back" // the runtime's give-back of an abandoned plain acquire's permits
)

// linIn is a model op's input.
type linIn struct {
	F       string
	N       int64
	Unknown bool // may or may not have taken effect; the output says nothing
	// Late: a plain acquire abandoned at its deadline, whose late reply
	// may take its permits until the runtime gives them back.
	Late bool
}

// linOut is a model op's output.
type linOut struct {
	OK bool
	N  int64 // a count read
}

// linMeta ties a porcupine operation back to the history.
type linMeta struct {
	op   *Op    // the op, or the fenced hold of a write; nil for a flush
	desc string // what the visualization shows
}

// partition is the ops of one key of one model.
type partition struct {
	kind, key string
	model     porcupine.Model
	ops       []porcupine.Operation
	checked   int // ops from the history (flushes not counted)
	unknown   int
	dropped   int
}

// CheckLinearizable checks latches, plain semaphores and fenced registers
// against their models. For each partition that is not linearizable it
// writes porcupine's visualization to artifactsDir ("": none) and names
// the file. Checked counts ops.
func CheckLinearizable(h *History, lim Limits, artifactsDir string) Result {
	c := newCollector(CheckNameLinear)
	unknown, dropped := 0, 0
	for _, p := range linearPartitions(h) {
		c.res.Checked += p.checked
		unknown += p.unknown
		dropped += p.dropped
		res := porcupine.CheckOperationsTimeout(p.model, p.ops, LinearizabilityTimeout)
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			c.note("%s %s: porcupine did not decide within %v (%d ops, %d of unknown outcome)", p.kind, p.key, LinearizabilityTimeout, p.checked, p.unknown)
			continue
		}
		c.add(p.violation(h, artifactsDir))
	}
	if unknown > 0 {
		c.note("%d ops of unknown outcome modelled as taking effect or not, at any time after their invoke", unknown)
	}
	if dropped > 0 {
		c.note("%d ops left out: reads of unknown outcome, or acquires that failed before trying", dropped)
	}
	return c.result()
}

// violation describes a partition porcupine found illegal: it reruns the
// check verbosely to find where the longest linearization stops and to
// write the visualization.
func (p *partition) violation(h *History, dir string) Violation {
	v := Violation{From: h.Begin, To: h.Finish}
	res, info := porcupine.CheckOperationsVerbose(p.model, p.ops, LinearizabilityTimeout)
	msg := fmt.Sprintf("%s %s: not linearizable (%d ops)", p.kind, p.key, p.checked)
	if res == porcupine.Illegal {
		if stuck, last := p.stuck(info); stuck != nil {
			m := stuck.Metadata.(linMeta)
			msg += fmt.Sprintf("; no linearization gets past %s at %s..%s", m.desc, relMS(h, stuck.Call), relMS(h, stuck.Return))
			v.From, v.To = stuck.Call, stuck.Return
			if last != nil {
				lm := last.Metadata.(linMeta)
				msg += fmt.Sprintf(" (the longest ends with %s)", lm.desc)
				v.From = min(v.From, last.Call)
				if lm.op != nil {
					v.Ops = append(v.Ops, lm.op)
				}
			}
			if m.op != nil {
				v.Ops = append(v.Ops, m.op)
			}
		}
		if dir != "" {
			path := filepath.Join(dir, htmlName(p.kind, p.key))
			if err := porcupine.VisualizePath(p.model, info, path); err != nil {
				msg += fmt.Sprintf("; visualization not written: %v", err)
			} else {
				msg += "; see " + path
				v.Files = append(v.Files, path)
			}
		}
	}
	v.Msg = msg
	return v
}

// stuck returns the first op (by invoke) that the longest partial
// linearization leaves out, and the last op of that linearization.
func (p *partition) stuck(info porcupine.LinearizationInfo) (stuck, last *porcupine.Operation) {
	parts := info.PartialLinearizationsOperations()
	if len(parts) == 0 {
		return nil, nil
	}
	var longest []porcupine.Operation
	for _, l := range parts[0] {
		if len(l) > len(longest) {
			longest = l
		}
	}
	in := map[*Op]map[int64]bool{} // linearized ops: by history op and call time (a hold has several writes)
	var flushes []int64
	for _, o := range longest {
		m := o.Metadata.(linMeta)
		if m.op == nil {
			flushes = append(flushes, o.Call)
			continue
		}
		if in[m.op] == nil {
			in[m.op] = map[int64]bool{}
		}
		in[m.op][o.Call] = true
	}
	for i := range p.ops {
		o := &p.ops[i]
		m := o.Metadata.(linMeta)
		done := (m.op == nil && slices.Contains(flushes, o.Call)) || (m.op != nil && in[m.op][o.Call])
		if !done && (stuck == nil || o.Call < stuck.Call) {
			stuck = o
		}
	}
	if len(longest) > 0 {
		last = &longest[len(longest)-1]
	}
	return stuck, last
}

// WriteLinearizationHTML writes porcupine's visualization of one
// partition (kind KindLatch, KindPlain or KindFenced, and its key) into
// dir, for a look at a run that passed too. It returns the file's path.
func WriteLinearizationHTML(dir string, h *History, kind, key string) (string, error) {
	for _, p := range linearPartitions(h) {
		if p.kind != kind || p.key != key {
			continue
		}
		res, info := porcupine.CheckOperationsVerbose(p.model, p.ops, LinearizabilityTimeout)
		if res == porcupine.Unknown {
			return "", fmt.Errorf("%s %s: porcupine did not decide within %v", kind, key, LinearizabilityTimeout)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		path := filepath.Join(dir, htmlName(kind, key))
		return path, porcupine.VisualizePath(p.model, info, path)
	}
	return "", fmt.Errorf("no %s partition with key %q", kind, key)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// htmlName is the visualization's file name for a partition.
func htmlName(kind, key string) string {
	return "linear-" + kind + "-" + unsafeName.ReplaceAllString(key, "_") + ".html"
}

// linearPartitions builds every partition of the history, in order of
// kind and key.
func linearPartitions(h *History) []*partition {
	end := h.Finish + 1 // after everything: where an op of unknown outcome returns
	parts := map[[2]string]*partition{}
	get := func(kind, key string) *partition {
		k := [2]string{kind, key}
		if parts[k] == nil {
			parts[k] = &partition{kind: kind, key: key, model: linModel(kind)}
		}
		return parts[k]
	}
	clients := map[[2]int]int{} // (proc, goroutine) -> porcupine client id
	client := func(o *Op) int {
		k := [2]int{o.Proc, o.G}
		id, ok := clients[k]
		if !ok {
			id = len(clients) + 1 // 0 is the nemesis
			clients[k] = id
		}
		return id
	}
	for _, o := range h.Ops {
		switch o.Kind {
		case KindLatch, KindPlain:
			p := get(o.Kind, o.Key)
			in, out, keep := classify(o)
			if !keep {
				p.dropped++
				continue
			}
			ret := o.Return
			if in.Unknown {
				ret = end
				p.unknown++
			}
			p.checked++
			p.ops = append(p.ops, porcupine.Operation{ClientId: client(o), Input: in, Call: o.Invoke, Output: out, Return: ret,
				Metadata: linMeta{op: o, desc: describeOp(o, in, out)}})
			if in.Late {
				gb := linIn{F: linGiveBack, N: in.N, Unknown: true}
				p.ops = append(p.ops, porcupine.Operation{ClientId: 0, Input: gb, Call: o.Invoke, Output: linOut{OK: true}, Return: end,
					Metadata: linMeta{op: o, desc: fmt.Sprintf("p%d/op%d %s", o.Proc, o.ID, describeIO(gb, linOut{OK: true}))}})
			}
		case KindFenced:
			if !o.Holds() || len(o.Writes) == 0 {
				continue
			}
			p := get(KindFenced, o.Key)
			for _, w := range o.Writes {
				in := linIn{F: linWrite, N: w.Read, Unknown: w.Outcome != OutOK && w.Outcome != OutFail}
				out := linOut{OK: w.Outcome == OutOK}
				ret := w.Return
				if in.Unknown || ret == Never {
					in.Unknown, ret = true, end
					p.unknown++
				}
				p.checked++
				p.ops = append(p.ops, porcupine.Operation{ClientId: client(o), Input: in, Call: w.Invoke, Output: out, Return: ret,
					Metadata: linMeta{op: o, desc: describeOp(o, in, out)}})
			}
		}
	}
	var out []*partition
	for _, k := range slices.SortedFunc(maps.Keys(parts), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		p := parts[k]
		if p.kind != KindFenced {
			for _, fl := range h.Faults {
				if !LosesData(fl.Type) || !lossAffects(fl, p.kind) {
					continue
				}
				in, ret := linIn{F: linFlush}, fl.End
				if ret == Never {
					in.Unknown, ret = true, end
				}
				p.ops = append(p.ops, porcupine.Operation{ClientId: 0, Input: in, Call: fl.Start, Output: linOut{OK: true}, Return: ret,
					Metadata: linMeta{desc: fmt.Sprintf("%s %s", fl.Type, fl.Target)}})
			}
		}
		if p.checked > 0 {
			out = append(out, p)
		}
	}
	return out
}

// classify turns a latch or plain-semaphore op into the model's input
// and output, or reports that it is left out.
func classify(o *Op) (linIn, linOut, bool) {
	f := o.F
	if f == FSweep && o.Kind == KindPlain {
		f = FAcquire
	}
	in := linIn{F: f, N: o.N}
	out := linOut{OK: o.Outcome == OutOK, N: o.N}
	known := o.Return != Never && (o.Outcome == OutOK || o.Outcome == OutFail)
	switch f {
	case FCount, FAvailable:
		return in, out, known && o.Outcome == OutOK
	case FAwait:
		return in, out, known
	case FSetCount:
		in.Unknown = !known
	case FAcquire:
		if o.Kind != KindPlain {
			return in, out, false
		}
		if o.Return != Never && o.Outcome == OutUnknown && neverTried(o.Err) {
			return in, out, false
		}
		in.Unknown = !known
		in.Late = in.Unknown && strings.Contains(o.Err, abandonedCall)
	case FCountDown, FRelease:
		// They cannot fail but for not knowing.
		in.Unknown = !known || o.Outcome != OutOK
	default:
		return in, out, false
	}
	return in, out, true
}

// abandonedCall is in the error of a call the runtime abandoned at its
// deadline (runtime/internal/scripts: a go-redis client that does not
// honour deadlines on reads).
const abandonedCall = "no reply by the end of the call"

// neverTried reports whether a plain semaphore acquire's error shows that
// it took nothing: the Client was closed, or its ctx done, while it waited
// between tries (a try that may have reached Redis says "outcome
// unknown").
func neverTried(err string) bool {
	if strings.Contains(err, "outcome unknown") {
		return false
	}
	return strings.Contains(err, "lock client closed") || strings.Contains(err, "context canceled") ||
		strings.Contains(err, "context deadline exceeded")
}

// describeOp renders a model op for the visualization and messages.
func describeOp(o *Op, in linIn, out linOut) string {
	return fmt.Sprintf("p%d/op%d %s", o.Proc, o.ID, describeIO(in, out))
}

func describeIO(in linIn, out linOut) string {
	arg := ""
	switch in.F {
	case FSetCount, FAcquire, FRelease, linWrite, linGiveBack:
		arg = fmt.Sprint(in.N)
	}
	res := "fail"
	switch {
	case in.Unknown:
		res = "unknown"
	case in.F == FCount || in.F == FAvailable:
		res = fmt.Sprint(out.N)
	case out.OK:
		res = "ok"
	}
	return fmt.Sprintf("%s(%s) -> %s", in.F, arg, res)
}

// linModel is the model of kind.
func linModel(kind string) porcupine.Model {
	var init int64
	var step func(s int64, in linIn, out linOut) []int64
	switch kind {
	case KindLatch:
		step = latchStep
	case KindPlain:
		init, step = -1, plainStep
	case KindFenced:
		step = registerStep
	}
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{init} },
		Step: func(state, input, output any) []any {
			next := step(state.(int64), input.(linIn), output.(linOut))
			out := make([]any, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Hash:              func(state any) uint64 { return uint64(state.(int64)) },
		DescribeOperation: func(input, output any) string { return describeIO(input.(linIn), output.(linOut)) },
		DescribeState: func(state any) string {
			if kind != KindPlain {
				return fmt.Sprint(state.(int64))
			}
			free, owed := plainState(state.(int64))
			desc := "absent"
			if free >= 0 {
				desc = fmt.Sprint(free)
			}
			if owed > 0 {
				desc += fmt.Sprintf(" (%d owed back)", owed)
			}
			return desc
		},
		DescribeOperationMetadata: func(info any) string {
			if m, ok := info.(linMeta); ok {
				return m.desc
			}
			return ""
		},
	}
	return nm.ToModel()
}

// either is the states after an op that may or may not have taken effect.
func either(s, next int64, unknown bool) []int64 {
	if unknown && next != s {
		return []int64{s, next}
	}
	return []int64{next}
}

// latchStep is the latch model: s is the count, 0 when absent.
func latchStep(s int64, in linIn, out linOut) []int64 {
	switch in.F {
	case linFlush:
		return either(s, 0, in.Unknown)
	case FSetCount:
		switch {
		case in.Unknown && s == 0:
			return either(s, in.N, true)
		case in.Unknown, !out.OK && s > 0:
			return []int64{s}
		case out.OK && s == 0:
			return []int64{in.N}
		}
		return nil
	case FCountDown:
		if s == 0 {
			return []int64{0}
		}
		return either(s, s-1, in.Unknown)
	case FCount:
		if out.N == s {
			return []int64{s}
		}
		return nil
	case FAwait:
		if out.OK == (s == 0) {
			return []int64{s}
		}
		return nil
	}
	return nil
}

// plainState splits a plain semaphore model state into the free count
// (-1 when absent) and the permits owed back by abandoned acquires whose
// late replies took them (see the package comment's models).
func plainState(s int64) (free, owed int64) {
	free = int64(int32(uint32(s)))
	return free, (s - free) >> 32
}

// plainOf is the state of free and owed.
func plainOf(free, owed int64) int64 { return owed<<32 + free }

// plainStep is the plain semaphore model (plainState).
func plainStep(s int64, in linIn, out linOut) []int64 {
	free, owed := plainState(s)
	next := plainFree(free, in, out)
	res := make([]int64, 0, len(next)+1)
	for _, f := range next {
		res = append(res, plainOf(f, owed))
	}
	switch {
	case in.F == FAcquire && in.Late && free >= in.N:
		// Taken by the late reply, to be given back.
		res = append(res, plainOf(free-in.N, owed+in.N))
	case in.F == linGiveBack && owed >= in.N:
		back := free + in.N
		if free < 0 {
			back = in.N // the release script creates the key
		}
		res = append(res, plainOf(back, owed-in.N))
	}
	return res
}

// plainFree is the plain semaphore model on the free count alone (-1 when
// absent).
func plainFree(s int64, in linIn, out linOut) []int64 {
	const absent = -1
	switch in.F {
	case linFlush:
		return either(s, absent, in.Unknown)
	case FSetCount:
		switch {
		case s == absent && (in.Unknown || out.OK):
			return either(s, in.N, in.Unknown)
		case s != absent && (in.Unknown || !out.OK):
			return []int64{s}
		}
		return nil
	case FAcquire:
		can := s != absent && s >= in.N
		switch {
		case can && (in.Unknown || out.OK):
			return either(s, s-in.N, in.Unknown)
		case !can && (in.Unknown || !out.OK):
			return []int64{s}
		}
		return nil
	case FRelease:
		next := s + in.N
		if s == absent {
			next = in.N
		}
		return either(s, next, in.Unknown)
	case FAvailable:
		if out.N == max(s, 0) {
			return []int64{s}
		}
		return nil
	case linGiveBack:
		return []int64{s} // or not yet (see plainStep)
	}
	return nil
}

// registerStep is the fenced register model: s is the last token
// accepted.
func registerStep(s int64, in linIn, out linOut) []int64 {
	if in.F != linWrite {
		return nil
	}
	switch {
	case in.N >= s && (in.Unknown || out.OK):
		return either(s, in.N, in.Unknown)
	case in.N < s && (in.Unknown || !out.OK):
		return []int64{s}
	}
	return nil
}
