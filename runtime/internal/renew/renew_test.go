package renew

import (
	"slices"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
)

type hold struct {
	Entry
	name      string
	keys      int
	slot      int
	taken     bool
	refuse    bool
	takenWhen time.Time
}

func (h *hold) RenewEntry() *Entry { return &h.Entry }

// t0 is a whole hour on the lease clock's scale (leaseclock.Nanos), where
// ticks fall: the tests' times are at known places in their ticks.
var t0 = leaseclock.Time(int64(time.Hour))

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestTimingOfAThreeSecondWatchdog(t *testing.T) {
	tm := NewTiming(3 * time.Second)
	if tm.Period != time.Second || tm.Tick != 50*time.Millisecond {
		t.Fatalf("%+v, want a 1s period in 50ms ticks", tm)
	}
	if tm := NewTiming(300 * time.Millisecond); tm.Tick != 5*time.Millisecond {
		t.Fatalf("tick of a 300ms watchdog = %v, want the 5ms floor", tm.Tick)
	}
	if tm := NewTiming(time.Hour); tm.Tick != 500*time.Millisecond {
		t.Fatalf("tick of an hour's watchdog = %v, want the 500ms ceiling", tm.Tick)
	}
}

// A renewal sent on time is followed by one a period later; one sent early
// keeps its phase, but never lands more than 5/4 of a period after the
// send, however many early renewals come in a row.
func TestNextRenewalKeepsThePhaseButNeverDrifts(t *testing.T) {
	tm := NewTiming(3 * time.Second)
	if got := tm.Next(at(1000), at(1000)); !got.Equal(at(2000)) {
		t.Fatalf("on time: next at %v, want 2s", got.Sub(t0))
	}
	if got := tm.Next(at(900), at(1000)); !got.Equal(at(2000)) {
		t.Fatalf("100ms early: next at %v, want the phase kept (2s)", got.Sub(t0))
	}
	// Repeated early rounds (reconnects) push the schedule forward, each
	// by at most 5/4 of a period from its send: the renewal stays well
	// within the lease (3 periods).
	due := at(1000)
	for sent := at(0); sent.Before(at(10000)); sent = sent.Add(100 * time.Millisecond) {
		due = tm.Next(sent, due)
		if gap := due.Sub(sent); gap > tm.Period+tm.Period/4 {
			t.Fatalf("sent at %v: next at %v, %v later", sent.Sub(t0), due.Sub(t0), gap)
		}
	}
}

func TestRetryComesSoonAndSeveralTimesBeforeTheDeadline(t *testing.T) {
	tm := NewTiming(3 * time.Second)
	for left, want := range map[time.Duration]time.Duration{
		3 * time.Second:        125 * time.Millisecond, // period/8
		200 * time.Millisecond: 50 * time.Millisecond,  // left/4
		2 * time.Millisecond:   time.Millisecond,       // the floor
		-time.Second:           time.Millisecond,
	} {
		if got := tm.Retry(left); got != want {
			t.Errorf("Retry(%v) = %v, want %v", left, got, want)
		}
	}
}

func names(hs []*hold) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.name)
	}
	return out
}

func TestWheelTakesWhatIsDueOnceAndSkipsStaleEntries(t *testing.T) {
	tm := NewTiming(3 * time.Second) // 50 ms ticks
	var w Wheel[*hold]
	a, b, c := &hold{name: "a"}, &hold{name: "b"}, &hold{name: "c"}
	w.Put(a, at(1000), tm)
	w.Put(b, at(1020), tm)
	w.Put(c, at(1100), tm)
	w.Put(b, at(3000), tm) // rescheduled: its first entry is stale
	var got []*hold
	take := func(h *hold) bool { got = append(got, h); return true }
	w.TakeDue(at(999), tm, take)
	if len(got) != 0 {
		t.Fatalf("before anything was due: took %v", names(got))
	}
	w.TakeDue(at(1049), tm, take)
	if !slices.Equal(names(got), []string{"a"}) {
		t.Fatalf("at 1049ms took %v, want [a] (b was rescheduled)", names(got))
	}
	w.TakeDue(at(1049), tm, take)
	w.TakeDue(at(2000), tm, take)
	if !slices.Equal(names(got), []string{"a", "c"}) {
		t.Fatalf("at 2s took %v, want [a c]: nothing twice", names(got))
	}
	w.TakeDue(at(3000), tm, take)
	if !slices.Equal(names(got), []string{"a", "c", "b"}) {
		t.Fatalf("at 3s took %v", names(got))
	}
	if len(w.buckets) != 0 {
		t.Fatalf("%d buckets left", len(w.buckets))
	}
}

// A hold put for a tick the wheel has passed goes in the next tick.
func TestWheelNeverLosesAHoldScheduledInThePast(t *testing.T) {
	tm := NewTiming(3 * time.Second)
	var w Wheel[*hold]
	w.TakeDue(at(5000), tm, func(*hold) bool { return true })
	late := &hold{name: "late"}
	w.Put(late, at(1000), tm)
	var got []*hold
	w.TakeDue(at(5049), tm, func(h *hold) bool { got = append(got, h); return true })
	if len(got) != 0 {
		t.Fatalf("took %v in a tick already taken", names(got))
	}
	w.TakeDue(at(5050), tm, func(h *hold) bool { got = append(got, h); return true })
	if !slices.Equal(names(got), []string{"late"}) {
		t.Fatalf("took %v, want the hold scheduled in the past", names(got))
	}
}

// Holds due within a quarter period fill the last call, earliest first,
// and leave the wheel; the rest stay.
func TestTakeEarlyFillsUpToTheHorizon(t *testing.T) {
	tm := NewTiming(3 * time.Second)
	var w Wheel[*hold]
	var hs []*hold
	for i := range 10 {
		h := &hold{name: string(rune('a' + i))}
		w.Put(h, at(1000+i*50), tm) // one per tick
		hs = append(hs, h)
	}
	w.TakeDue(at(999), tm, func(*hold) bool { return true })
	var got []*hold
	room := func() bool { return len(got) < 3 }
	w.TakeEarly(tm.EarlyHorizon(at(999)), tm, room, func(h *hold) bool { got = append(got, h); return true })
	if !slices.Equal(names(got), []string{"a", "b", "c"}) {
		t.Fatalf("took %v early, want the 3 earliest", names(got))
	}
	got = nil
	room = func() bool { return true }
	w.TakeEarly(tm.EarlyHorizon(at(999)), tm, room, func(h *hold) bool { got = append(got, h); return true })
	// The horizon is 999ms + 250ms: holds due at 1150 and 1200 (d, e).
	if !slices.Equal(names(got), []string{"d", "e"}) {
		t.Fatalf("took %v up to the horizon, want [d e]", names(got))
	}
}

func TestBatchesHoldAtMostMaxKeysOfOneSlot(t *testing.T) {
	unit := func(h *hold) Unit { return Unit{Keys: h.keys, Slot: h.slot} }
	var hs []*hold
	for i := range 7 {
		hs = append(hs, &hold{name: string(rune('a' + i)), keys: 1 + i%2, slot: i / 4})
	}
	// keys 1 2 1 2 | 1 2 1, slots 0 0 0 0 | 1 1 1
	batches := Batches(hs, unit, true, 4)
	var got [][]string
	for _, b := range batches {
		got = append(got, names(b))
	}
	want := [][]string{{"a", "b", "c"}, {"d"}, {"e", "f", "g"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	got = nil
	for _, b := range Batches(hs, unit, false, 4) {
		got = append(got, names(b))
	}
	want = [][]string{{"a", "b", "c"}, {"d", "e"}, {"f", "g"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches without slots %v, want %v", got, want)
	}
	big := []*hold{{name: "big", keys: 9}}
	if b := Batches(big, unit, true, 4); len(b) != 1 || len(b[0]) != 1 {
		t.Fatalf("an item over the limit: %v", b)
	}
}

func TestCallsServeOneSlot(t *testing.T) {
	unit := func(h *hold) Unit { return Unit{Keys: 1, Slot: h.slot} }
	var batches [][]*hold
	for i := range 5 {
		batches = append(batches, []*hold{{name: string(rune('a' + i)), slot: i / 3}})
	}
	calls := Calls(batches, unit, true, 2)
	var sizes []int
	for _, c := range calls {
		sizes = append(sizes, len(c))
	}
	if !slices.Equal(sizes, []int{2, 1, 2}) {
		t.Fatalf("calls of %v batches, want [2 1 2] (slot 0: a b | c; slot 1: d e)", sizes)
	}
	if calls := Calls(batches, unit, false, 2); len(calls) != 3 {
		t.Fatalf("%d calls without slots, want 3", len(calls))
	}
}

// An emptied bucket is reused for a later tick, holding nothing of what
// it held before.
func TestWheelReusesEmptiedBucketsWithoutTheirItems(t *testing.T) {
	tm := NewTiming(3 * time.Second) // 50 ms ticks
	var w Wheel[*hold]
	old := []*hold{{name: "a"}, {name: "b"}, {name: "c"}}
	for _, h := range old {
		w.Put(h, at(1000), tm)
	}
	var got []*hold
	take := func(h *hold) bool { got = append(got, h); return true }
	w.TakeDue(at(1049), tm, take)
	if len(w.spare) != 1 || cap(w.spare[0].items) < len(old) {
		t.Fatalf("spare buckets %d, want the emptied one", len(w.spare))
	}
	for _, h := range w.spare[0].items[:cap(w.spare[0].items)] {
		if h != nil {
			t.Fatalf("a spare bucket still holds %s", h.name)
		}
	}
	d := &hold{name: "d"}
	w.Put(d, at(2000), tm)
	if len(w.spare) != 0 {
		t.Fatal("a new tick's bucket did not reuse the spare one")
	}
	got = nil
	w.TakeDue(at(2049), tm, take)
	if !slices.Equal(names(got), []string{"d"}) {
		t.Fatalf("took %v from the reused bucket, want [d]", names(got))
	}
}
