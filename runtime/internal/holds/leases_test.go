package holds

import (
	"context"
	"testing"
	"time"
)

// addField is add with a field of its own (a write hold is proved by
// "<owner>:write", its owner's read hold by the owner).
func (f *fixture) addField(parent context.Context, key, owner, field string, lease time.Duration) *Context {
	return f.r.Add(parent, Spec{Name: "n", Key: key, Kind: "readwrite", From: f.from}, NewArgs(key, owner, field), lease, time.Now())
}

// waitGone waits until the lease clock ended hc's hold at its deadline
// (its ctx's own deadline may end it a little before) and let go of its
// shard, whose mutex expire holds until it has given the hold back.
func (f *fixture) waitGone(t *testing.T, hc *Context) {
	t.Helper()
	h := hc.Acquisition().Hold()
	for deadline := time.Now().Add(5 * time.Second); !h.Lost(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lease clock did not end a fixed-lease hold")
		}
	}
	f.r.State(ID{h.Key, h.Field}, 0)
}

// A fixed-lease hold that runs out while its owner has another hold of the
// key (a downgrade: the read hold under the write hold) is given back: the
// other hold keeps the key, and the expired field with it, alive. Alone on
// its key, or beside another owner's hold, it is not: Redis expired it.
func TestAFixedLeaseRunningOutBesideItsOwnersOtherHoldIsGivenBack(t *testing.T) {
	f := newFixture(t, 30*time.Second)
	write := f.addField(context.Background(), "rw", "o", "o:write", 0)
	read := f.addField(write, "rw", "o", "o", 30*time.Millisecond)
	f.waitGone(t, read)
	if write.Err() != nil {
		t.Fatalf("the write hold ended with the read hold's lease: %v", context.Cause(write))
	}
	if n := f.from.gave(); n != 1 {
		t.Fatalf("a read hold expired beside its owner's write hold: given back %d times, want 1", n)
	}
	// The fixed lease on the write side, a watchdog read hold beside it.
	w2 := f.addField(context.Background(), "rw2", "o", "o:write", 30*time.Millisecond)
	r2 := f.addField(context.Background(), "rw2", "o", "o", 0)
	f.waitGone(t, w2)
	if r2.Err() != nil || f.from.gave() != 2 {
		t.Fatalf("write hold expired beside its owner's read hold: read ended %v, given back %d, want alive and 2", r2.Err(), f.from.gave())
	}
	// Alone on its key, or beside another owner's hold: nothing to give back.
	alone := f.add(context.Background(), "solo", "o", 30*time.Millisecond)
	other := f.add(context.Background(), "shared", "p", 0)
	beside := f.add(context.Background(), "shared", "o", 30*time.Millisecond)
	f.waitGone(t, alone)
	f.waitGone(t, beside)
	if other.Err() != nil || f.from.gave() != 2 {
		t.Fatalf("fixed leases expired alone or beside another owner: given back %d times, want still 2", f.from.gave())
	}
	if _, ok := f.r.Drop(read.Acquisition()); !ok {
		t.Fatal("the expired read hold's acquisition could not be dropped")
	}
	if d, ok := f.r.Drop(write.Acquisition()); !ok || !d.Last {
		t.Fatalf("write Drop = %+v, %v; want the last of its hold", d, ok)
	}
}

// The watchdog renews a hold while any of its acquisitions has the
// watchdog lease, whatever order they are released in; dropping a
// fixed-lease acquisition does not stop it.
func TestTheWatchdogRenewsAHoldUntilItsLastWatchdogAcquisitionIsDropped(t *testing.T) {
	f := newFixture(t, 30*time.Second)
	renewed := func() int {
		due := f.r.TakeDue(time.Now(), true, 100, nil)
		f.r.ReportAll(due, func(int) Renewal { return Unconfirmed }, time.Now(), time.Now(), nil)
		return len(due)
	}
	outer := f.add(context.Background(), "k", "o", 0)
	fixed := f.add(outer, "k", "o", time.Minute)
	inner := f.add(fixed, "k", "o", 0)
	if n := renewed(); n != 1 {
		t.Fatalf("%d holds due, want 1", n)
	}
	if _, ok := f.r.Drop(fixed.Acquisition()); !ok || renewed() != 1 {
		t.Fatal("dropping the fixed-lease acquisition stopped the watchdog")
	}
	if _, ok := f.r.Drop(outer.Acquisition()); !ok || renewed() != 1 {
		t.Fatal("dropping one of two watchdog acquisitions stopped the watchdog")
	}
	if d, ok := f.r.Drop(inner.Acquisition()); !ok || !d.Last || renewed() != 0 || f.r.Len() != 0 {
		t.Fatalf("the last Drop = %+v, %v; want the hold gone and renewed no more", d, ok)
	}
	// A fixed-lease outer hold, the watchdog's nested inside it: renewed
	// until the nested one is dropped, the outer one kept.
	out := f.add(context.Background(), "k2", "o", time.Minute)
	in := f.add(out, "k2", "o", 0)
	if renewed() != 1 {
		t.Fatal("a nested watchdog acquisition is not renewed")
	}
	if d, ok := f.r.Drop(in.Acquisition()); !ok || d.Last || renewed() != 0 {
		t.Fatalf("inner Drop = %+v, %v; want the hold kept and renewed no more", d, ok)
	}
	if d, ok := f.r.Drop(out.Acquisition()); !ok || !d.Last {
		t.Fatalf("outer Drop = %+v, %v; want the last", d, ok)
	}
}

// An Exit lets exactly one of the calls waiting for the turn in, and the
// next Exit the next one; a waiter whose ctx ended takes no wake-up away.
func TestAnExitLetsExactlyOneWaiterIn(t *testing.T) {
	f := newFixture(t, 30*time.Second)
	id := ID{"k", "o"}
	if _, _, err := f.r.Enter(context.Background(), id, 0); err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(context.Background())
	quit := make(chan error, 1)
	go func() { _, _, err := f.r.Enter(gone, id, 0); quit <- err }()
	entered := make(chan int, 3)
	for i := range 3 {
		go func() {
			if _, _, err := f.r.Enter(context.Background(), id, 0); err == nil {
				entered <- i
			}
		}()
	}
	time.Sleep(20 * time.Millisecond) // all waiting
	cancel()
	if err := <-quit; err == nil {
		t.Fatal("a waiter whose ctx ended entered a busy turn")
	}
	for n := range 3 {
		f.r.Exit(id)
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("Exit %d woke no waiter", n+1)
		}
		select {
		case i := <-entered:
			t.Fatalf("Exit %d let a second waiter (%d) in", n+1, i)
		case <-time.After(20 * time.Millisecond):
		}
	}
	f.r.Exit(id)
	if _, _, err := f.r.Enter(context.Background(), id, 0); err != nil {
		t.Fatal(err)
	}
	f.r.Exit(id)
}
