package lockgen

import (
	"strings"
	"testing"

	"github.com/lockgen/lockgen/templates"
)

// A slot whose text follows a literal $ in the key: withSlot inserts "{"
// after the $, re-parses "a${x}:${id}" and reads ${x} as a placeholder
// (an undeclared one, whose problem it drops). The generated key function
// renders "a" + "" + ":" + id: the slot's hash tag and the literal x are
// gone, and lock A now renders exactly B's keys, which the key-space check
// skipped (an undeclared param makes keyLanguage give up).
func TestZZSlotAfterDollarDropsTagAndCollides(t *testing.T) {
	src := "version: 1\npackage: locks\nlocks:\n" +
		"  A:\n    key: \"a$x:${id}\"\n    params: {id: int64}\n    slot: \"x\"\n" +
		"  B:\n    key: \"a:${id}\"\n    params: {id: int64}\n"
	s, err := Parse("locks.yaml", []byte(src))
	if err != nil {
		t.Logf("rejected (fixed?): %v", err)
		return
	}
	f := templates.File{Path: "example.com/locks", Package: "locks", Source: "locks.yaml", Imports: map[string]string{}}
	for _, l := range s.Locks {
		f.Locks = append(f.Locks, lockModel(l))
	}
	out, err := templates.Emit(f)
	if err != nil {
		t.Fatal(err)
	}
	a := string(out[strings.Index(string(out), "func aKey"):])
	a = a[:strings.Index(a, "\n}\n")]
	t.Logf("%s", a)
	if !strings.Contains(a, "{x}") {
		t.Errorf("A's key function lost the slot's hash tag {x} (want a${x}:<id> as a key with tag x, or a spec error)")
	}
	if strings.Contains(a, `"a" + "" + ":"`) {
		t.Errorf("A renders a:<id>, the very keys of lock B")
	}
}

// With a string param: "a$${t}" and slot "${t}" render the constant "a}"
// for every t (which the runtime then refuses as an unbalanced brace).
func TestZZSlotAfterDollarDropsParam(t *testing.T) {
	src := "version: 1\npackage: locks\nlocks:\n  A:\n    key: \"a$${t}\"\n    params: {t: string}\n    slot: \"${t}\"\n"
	s, err := Parse("locks.yaml", []byte(src))
	if err != nil {
		t.Logf("rejected (fixed?): %v", err)
		return
	}
	m := lockModel(s.Locks[0])
	var params int
	for _, seg := range m.Segments {
		if seg.Param != "" {
			params++
		}
	}
	if params == 0 {
		t.Errorf("the key %q has no param left: every t takes the same key (segments %+v)", m.Key, m.Segments)
	}
}
