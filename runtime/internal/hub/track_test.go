package hub

import (
	"slices"
	"testing"
	"time"
)

func TestTrackerReadsQuietKeysAndPutsOffBusyOnes(t *testing.T) {
	tr := newTracker()
	quiet := &entry{name: "ch:q", key: "q"}
	busy := &entry{name: "ch:b", key: "b"}
	tr.watch(quiet)
	tr.watch(busy)
	tr.watch(&entry{name: "ch:none"}) // no key: nothing to watch
	now := time.Now().UnixNano()
	busy.lastMsg.Store(now) // its unlock messages flow: leave it alone
	keys, putOff := tr.dueKeys(nil, now)
	if !slices.Equal(keys, []string{"q"}) || !putOff {
		t.Fatalf("due %v putOff %v: want the quiet key read and the busy one put off", keys, putOff)
	}
	if keys, _ := tr.dueKeys(nil, now+int64(trackQuiet)); !slices.Equal(keys, []string{"b"}) {
		t.Fatalf("due %v: the busy key is due once its lock was quiet for trackQuiet", keys)
	}
	tr.invalidated("q", "unwatched")
	if keys, _ := tr.dueKeys(nil, now); !slices.Equal(keys, []string{"q"}) {
		t.Fatalf("due %v: an invalidation makes a watched key due, and only a watched one", keys)
	}
	if got := tr.gone("q"); len(got) != 1 || got[0] != quiet {
		t.Fatal("a gone key wakes its entry")
	}
	tr.unwatch(quiet)
	tr.invalidated("q")
	if keys, _ := tr.dueKeys(nil, now); len(keys) != 0 || tr.gone("q") != nil {
		t.Fatal("an unwatched key is read no more")
	}
	moved := &entry{name: "ch:m", key: "m"}
	tr.watch(moved) // due at once
	tr.unwatch(moved)
	if keys, _ := tr.dueKeys(nil, now); len(keys) != 0 {
		t.Fatalf("due %v: a key due when its last waiter left (or its slot moved away) is not read", keys)
	}
}

// A key found held by its longest waiter's own field (a grant in Redis
// whose message was lost) wakes that waiter, and only while no offer to
// it stands; a channel without waiters passes the check on.
func TestAKeyGrantedToTheLongestWaiterWakesIt(t *testing.T) {
	h := memHub(t)
	left, _ := h.Join("left", false, Sub{Key: "k"})
	confirm(h, "left")
	tried(h, left)
	gone := left.e
	h.Leave(left, true) // took the lock: its channel lingers without waiters
	w1 := parked(t, h, "ch", "f1")
	w2 := parked(t, h, "ch", "f2")
	confirm(h, "ch")
	tried(h, w1, w2)
	h.Park(w1)
	h.Park(w2)
	g := longestGrantee([]*entry{gone, w1.e})
	if g.w != w1 || g.field != "f1" {
		t.Fatalf("grantee %v %q, want the longest waiter on a channel with waiters, as f1", g.w, g.field)
	}
	g.wake()
	if !signalled(w1) || signalled(w2) {
		t.Fatal("the waiter the key was granted to is woken, and only it")
	}
	h.Tried(w1, false, false)
	h.Park(w1)
	if o := h.Offer("ch"); !o.Made() || o.w != w1 {
		t.Fatal("no offer to w1")
	}
	g.wake()
	if signalled(w1) {
		t.Fatal("a waiter with an offer in flight is left to its releaser's Settle")
	}
}
