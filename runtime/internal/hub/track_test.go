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
