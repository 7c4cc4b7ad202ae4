package hub

import (
	"testing"

	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// A channel whose subscribe was still unconfirmed when it left, and whose
// subscribe the server then refused because its slot moved, has nothing
// left pending on the connection: when the slot comes back to the same
// connection (kept open by another slot's channels) and the channel is
// subscribed again, that subscribe's confirmation makes it ready.
func TestASlotMoveForgetsTheSubscribesOfChannelsThatLeft(t *testing.T) {
	h := New(Config{})
	t.Cleanup(h.Close)
	l := &h.links
	sc := &subConn{
		node:          "a",
		entries:       make(map[string]*entry),
		pending:       make(map[string]int),
		unsubscribing: make(map[string]int),
		kick:          make(chan struct{}, 1),
	}
	const gone, other = "ch:{gone}", "ch:{other}"
	if scripts.KeySlot(gone) == scripts.KeySlot(other) {
		t.Fatal("the two channels must be in different slots")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	sc.addLocked(&entry{name: other, sh: h.shard(other)})
	left := &entry{name: gone, sh: h.shard(gone)}
	sc.addLocked(left)
	delete(sc.entries, gone) // it left before its subscribe was confirmed
	sc.unsubscribing[gone]++

	l.moveSlotLocked(sc, scripts.KeySlot(gone), "b") // the subscribe's MOVED reply
	if n := sc.pending[gone]; n != 0 {
		t.Fatalf("%d subscribes of %s still pending after its slot moved away", n, gone)
	}

	again := &entry{name: gone, sh: h.shard(gone)}
	sc.addLocked(again) // the slot came back; the channel is subscribed again
	if e, gen := sc.confirmedLocked(gone); e != again || gen != again.gen.Load() {
		t.Fatalf("the new subscribe's confirmation gave entry %p gen %d, want %p gen %d", e, gen, again, again.gen.Load())
	}
}
