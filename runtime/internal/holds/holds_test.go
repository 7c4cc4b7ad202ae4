package holds

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
)

// taker records what the registry asked of the handle that took a hold.
type taker struct {
	mu    sync.Mutex
	given []*Hold
	extra []string
}

func (t *taker) GiveBackLost(h *Hold) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.given = append(t.given, h)
}

func (t *taker) ExtraKeys(*Hold) []string { return t.extra }

func (t *taker) gave() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.given)
}

var errExpired = errors.New("expired")

type fixture struct {
	r    *Registry
	from *taker
	mu   sync.Mutex
	lost []error
}

func newFixture(t *testing.T, watchdog time.Duration) *fixture {
	f := &fixture{from: &taker{}}
	f.r = New(Config{
		Watchdog: watchdog,
		Started:  func() {},
		Lost: func(_ *Hold, cause error) {
			f.mu.Lock()
			f.lost = append(f.lost, cause)
			f.mu.Unlock()
		},
		Expired: func(_ *Hold, why string) error { return errExpired },
	})
	t.Cleanup(func() { f.r.Close(func(*Hold) error { return context.Canceled }) })
	return f
}

func (f *fixture) add(parent context.Context, key, owner string, lease time.Duration) *Context {
	return f.r.Add(parent, Spec{Name: "n", Key: key, Kind: "reentrant", From: f.from, Extra: f.from.extra != nil}, NewArgs(key, owner, owner), lease, time.Now())
}

func TestNestedAcquisitionsCountOneHold(t *testing.T) {
	f := newFixture(t, 30*time.Second)
	outer := f.add(context.Background(), "k", "o1", 0)
	inner := f.add(outer, "k", "o1", time.Minute)
	id := ID{"k", "o1"}
	if n, px := f.r.State(id, time.Second); n != 2 || px < 30*time.Second-time.Second {
		t.Fatalf("State = %d, %v; want 2 holds and at least the watchdog's lease", n, px)
	}
	if f.r.Of(inner) != inner || inner.Parent() != outer || f.r.Of(context.Background()) != nil {
		t.Fatal("Of/Parent do not follow the ctx chain")
	}
	if Find(inner, id) != inner.Acquisition() || Find(inner, ID{"k", "other"}) != nil {
		t.Fatal("Find does not find the innermost acquisition of id only")
	}
	d, ok := f.r.Drop(inner.Acquisition())
	if !ok || d.Last || d.Count != 2 || d.Lease < 30*time.Second-time.Second {
		t.Fatalf("inner Drop = %+v, %v; want a partial release keeping the watchdog's lease", d, ok)
	}
	if _, ok := f.r.Drop(inner.Acquisition()); ok {
		t.Fatal("an acquisition dropped twice")
	}
	d, ok = f.r.Drop(outer.Acquisition())
	if !ok || !d.Last || d.Count != 1 {
		t.Fatalf("outer Drop = %+v, %v; want the last hold", d, ok)
	}
	if f.r.Len() != 0 {
		t.Fatalf("%d holds left after the last release", f.r.Len())
	}
}

func TestTurnsOfOneOwnerDoNotOverlap(t *testing.T) {
	f := newFixture(t, 30*time.Second)
	id := ID{"k", "o"}
	if _, _, err := f.r.Enter(context.Background(), id, 0); err != nil {
		t.Fatal(err)
	}
	// Another owner, or another lock, does not wait.
	if _, _, err := f.r.Enter(context.Background(), ID{"k", "p"}, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := f.r.Enter(ctx, id, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Enter of a busy turn = %v, want it to wait until its ctx ends", err)
	}
	entered := make(chan struct{})
	go func() {
		_, _, _ = f.r.Enter(context.Background(), id, 0)
		close(entered)
	}()
	select {
	case <-entered:
		t.Fatal("entered a busy turn")
	case <-time.After(10 * time.Millisecond):
	}
	f.r.Exit(id)
	<-entered
	f.r.Exit(id)
}

func TestUnknownMarksAreDroppedOnlyByTheirGeneration(t *testing.T) {
	f := newFixture(t, 30*time.Second)
	id := ID{"k", "o"}
	if f.r.Unknown(id) {
		t.Fatal("unknown before any mark")
	}
	g1 := f.r.MarkUnknown(id)
	g2 := f.r.MarkUnknown(id)
	if g1 == 0 || g2 == g1 || f.r.Mark(id) != g2 {
		t.Fatalf("marks %d, %d, current %d", g1, g2, f.r.Mark(id))
	}
	f.r.DropMark(id, g1) // an older settlement's: not ours any more
	if !f.r.Unknown(id) {
		t.Fatal("an old generation dropped a newer mark")
	}
	f.r.DropMark(id, 0)
	if f.r.Unknown(id) || f.r.unknownN.Load() != 0 {
		t.Fatal("mark left after DropMark(id, 0)")
	}
}

func TestTheClockEndsAHoldAtItsDeadline(t *testing.T) {
	f := newFixture(t, 300*time.Millisecond)
	start := time.Now()
	fixed := f.add(context.Background(), "fixed", "o", 50*time.Millisecond)
	wd := f.add(context.Background(), "wd", "o", 0)
	<-fixed.Done()
	if took := time.Since(start); took < 50*time.Millisecond-leaseclock.Drift(50*time.Millisecond) {
		t.Fatalf("a 50ms fixed lease ended after %v, before its deadline", took)
	}
	// Never renewed: the watchdog hold ends at its lease minus drift, and
	// its taker is asked to give back what renewals may have set.
	<-wd.Done()
	if !errors.Is(context.Cause(wd), errExpired) {
		t.Fatalf("cause %v, want the Expired cause", context.Cause(wd))
	}
	if took := time.Since(start); took < 300*time.Millisecond-leaseclock.Drift(300*time.Millisecond) {
		t.Fatalf("an unrenewed 300ms watchdog hold ended after %v, before its deadline", took)
	}
	// The ctx ends first (before anything else happens), then the clock
	// asks the taker to give back: wait for that, briefly.
	for deadline := time.Now().Add(5 * time.Second); f.from.gave() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if !wd.Acquisition().Hold().Lost() || f.from.gave() != 1 {
		t.Fatalf("lost %v, give-backs %d; want the watchdog hold lost and given back once", wd.Acquisition().Hold().Lost(), f.from.gave())
	}
	if d, ok := f.r.Drop(wd.Acquisition()); !ok || !errors.Is(d.Lost, errExpired) {
		t.Fatalf("Drop of a lost hold = %+v, %v", d, ok)
	}
}

func TestRenewalsMoveTheDeadlineAndAGoneKeyEndsTheHold(t *testing.T) {
	f := newFixture(t, 300*time.Millisecond)
	f.from.extra = []string{"extra"}
	hc := f.add(context.Background(), "k", "o", 0)
	h := hc.Acquisition().Hold()
	if due := f.r.TakeDue(time.Now(), false, 100, nil); len(due) != 0 {
		t.Fatalf("%d holds due at once", len(due))
	}
	due := f.r.TakeDue(time.Now().Add(f.r.Timing().Period+f.r.Timing().Tick), false, 100, nil)
	if len(due) != 1 || due[0].H != h || len(due[0].Extra) != 1 {
		t.Fatalf("due %v; want the hold and its extra key after a period", due)
	}
	if again := f.r.TakeDue(time.Now().Add(time.Hour), true, 100, nil); len(again) != 0 {
		t.Fatal("a hold in flight taken again")
	}
	_, before := Earliest([][]Due{due})
	sent := time.Now().Add(50 * time.Millisecond)
	if f.r.ReportAll(due, func(int) Renewal { return Renewed }, sent, time.Now(), nil) != 1 {
		t.Fatal("a renewal not reported confirmed")
	}
	due = f.r.TakeDue(time.Now(), true, 100, nil)
	if _, after := Earliest([][]Due{due}); !after.After(before) {
		t.Fatalf("deadline %v did not move past %v", after, before)
	}
	gone := errors.New("gone")
	f.r.ReportAll(due[:1], func(int) Renewal { return Gone }, time.Now(), time.Now(), func(*Hold) error { return gone })
	if !errors.Is(context.Cause(hc), gone) || f.r.Len() != 0 {
		t.Fatalf("cause %v, %d holds left; want the hold lost", context.Cause(hc), f.r.Len())
	}
}

func TestCloseCancelsEveryHoldAndRefusesNewOnes(t *testing.T) {
	f := newFixture(t, 30*time.Second)
	hc := f.add(context.Background(), "k", "o", 0)
	closed := errors.New("closed")
	if !f.r.Close(func(*Hold) error { return closed }) {
		t.Fatal("first Close reported closed already")
	}
	if !errors.Is(context.Cause(hc), closed) {
		t.Fatalf("cause %v after Close", context.Cause(hc))
	}
	if f.add(context.Background(), "k2", "o", 0) != nil {
		t.Fatal("a hold added after Close")
	}
	if f.r.Close(func(*Hold) error { return closed }) {
		t.Fatal("second Close did it again")
	}
}

func TestReportAllAppliesEachHoldsRenewal(t *testing.T) {
	f := newFixture(t, 300*time.Millisecond)
	keys := []string{"a", "b", "c", "d"}
	hcs := make([]*Context, len(keys))
	for i, k := range keys {
		hcs[i] = f.add(context.Background(), k, "o", 0)
	}
	due := f.r.TakeDue(time.Now(), true, 100, nil)
	if len(due) != len(keys) {
		t.Fatalf("%d holds taken, want %d", len(due), len(keys))
	}
	before := map[*Hold]int64{}
	for _, u := range due {
		before[u.H] = u.Valid
	}
	want := map[*Hold]Renewal{}
	res := func(j int) Renewal {
		r := []Renewal{Renewed, Gone, Unconfirmed, Renewed}[j]
		want[due[j].H] = r
		return r
	}
	gone := errors.New("gone")
	sent := time.Now().Add(50 * time.Millisecond)
	if n := f.r.ReportAll(due, res, sent, time.Now(), func(*Hold) error { return gone }); n != 2 {
		t.Fatalf("%d confirmed, want 2", n)
	}
	for i, hc := range hcs {
		h := hc.Acquisition().Hold()
		if lost := errors.Is(context.Cause(hc), gone); lost != (want[h] == Gone) {
			t.Fatalf("hold %s: lost %v after %v", keys[i], lost, want[h])
		}
	}
	// Every hold left is off flight (taken again), the renewed ones with a
	// later deadline.
	again := f.r.TakeDue(time.Now(), true, 100, nil)
	if len(again) != 3 {
		t.Fatalf("%d holds taken again, want the 3 not lost", len(again))
	}
	for _, u := range again {
		if moved := u.Valid > before[u.H]; moved != (want[u.H] == Renewed) {
			t.Fatalf("deadline of a hold that was %v moved: %v", want[u.H], moved)
		}
	}
}

func TestALateCallKeepsItsOwnerWaitingUntilItLands(t *testing.T) {
	f := newFixture(t, 30*time.Second)
	id := ID{"k", "o1"}
	gen := f.r.Abandon(id)
	gen2 := f.r.Abandon(id) // a second abandoned call on the same hold
	if f.r.Mark(id) != gen2 || gen2 <= gen || !f.r.Late(id) {
		t.Fatalf("after two Abandons: mark %d (gens %d, %d), late %v; want the newer mark and late", f.r.Mark(id), gen, gen2, f.r.Late(id))
	}
	waited := make(chan struct{})
	go func() {
		f.r.WaitLate(context.Background(), id)
		close(waited)
	}()
	f.r.Landed(id)
	select {
	case <-waited:
		t.Fatal("WaitLate returned with one of two calls still late")
	case <-time.After(20 * time.Millisecond):
	}
	f.r.Landed(id)
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitLate did not return once every call landed")
	}
	if f.r.Late(ID{"k", "o2"}) || f.r.Late(id) {
		t.Fatal("Late after every call landed, or for another owner")
	}
	if !f.r.Unknown(id) {
		t.Fatal("landing dropped the unknown mark: only a re-read of the count may")
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.r.Abandon(id)
	cancel()
	f.r.WaitLate(ctx, id) // returns at once: its ctx is done
}

// An acquisition recorded after its deadline (its process was frozen by
// SIGSTOP between the try's send and its return, and the monotonic clock
// ran on meanwhile) is handed out with its ctx already done: the caller
// must not act on a hold whose lease ran out, as it would until the
// clock's next wake-up (the robustness suite's seed 796733072: a worker
// wrote 0.1 ms after such a return, while another process held the lock).
func TestAnAcquisitionRecordedPastItsDeadlineIsDoneOnReturn(t *testing.T) {
	f := newFixture(t, 300*time.Millisecond)
	sent := time.Now().Add(-time.Second) // a second ago: past both leases
	for _, lease := range []time.Duration{0, 200 * time.Millisecond} {
		hc := f.r.Add(context.Background(), Spec{Name: "n", Key: fmt.Sprint("k", lease), Kind: "reentrant", From: f.from}, NewArgs("k", "o", "o"), lease, sent)
		if hc.Err() == nil {
			t.Fatalf("lease %v: a hold recorded past its deadline was handed out live", lease)
		}
		if !errors.Is(context.Cause(hc), errExpired) && lease == 0 {
			t.Fatalf("lease %v: cause %v, want the Expired cause", lease, context.Cause(hc))
		}
	}
}
