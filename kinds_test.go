package lockgen

import (
	"testing"

	"github.com/lockgen/lockgen/templates"
)

// TestEveryImplementedKindHasAnEmitter keeps Kind.Implemented and the
// templates' emitters in step: a kind that validates must also render.
func TestEveryImplementedKindHasAnEmitter(t *testing.T) {
	implemented := 0
	for _, k := range Kinds {
		if !k.Implemented() {
			continue
		}
		implemented++
		spec, err := Parse("locks.yaml", []byte("version: 1\npackage: p\nlocks:\n  ALock: {kind: "+string(k)+", key: a}\n"))
		if err != nil {
			t.Errorf("%s: %v", k, err)
			continue
		}
		f := templates.File{Path: "example.com/p", Package: "p", Source: "locks.yaml", Locks: []templates.Lock{lockModel(spec.Locks[0])}}
		if _, err := templates.Emit(f); err != nil {
			t.Errorf("%s validates but does not render: %v", k, err)
		}
	}
	if implemented != 3 {
		t.Errorf("%d kinds implemented, want reentrant, fair and readwrite", implemented)
	}
}

// TestFairnessDefaultsWhenLeftOut checks the values a fair or readwrite
// lock gets without a fairness mapping: Redisson's 5m queue timeout and
// Redisson's reader order.
func TestFairnessDefaultsWhenLeftOut(t *testing.T) {
	spec, err := Parse("locks.yaml", []byte("version: 1\npackage: p\nlocks:\n  F: {kind: fair, key: f}\n  R: {kind: readwrite, key: r}\n  W: {kind: readwrite, key: w, fairness: {writers: first}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, r, w := lockModel(spec.Lock("F")), lockModel(spec.Lock("R")), lockModel(spec.Lock("W"))
	if f.QueueTimeout != DefaultQueueTimeout || r.WritersFirst || !w.WritersFirst {
		t.Fatalf("fair queue timeout %v, readwrite writers first %v / %v", f.QueueTimeout, r.WritersFirst, w.WritersFirst)
	}
}
