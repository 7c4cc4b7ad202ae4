package lockgen

import (
	"math/rand"
	"strings"
	"testing"
)

// Property: for every key and slot that Parse accepts, the key the
// generator renders (withSlot) keeps every placeholder of the key and the
// key's literal text, and adds exactly one hash tag.
func TestZZSlotProperty(t *testing.T) {
	alpha := []string{"a", ":", "$", "x", "${t}", "${id}", "-", "%"}
	r := rand.New(rand.NewSource(1))
	bad := 0
	for i := 0; i < 200000 && bad < 5; i++ {
		var k, s strings.Builder
		for j := 0; j < 1+r.Intn(6); j++ {
			k.WriteString(alpha[r.Intn(len(alpha))])
		}
		for j := 0; j < 1+r.Intn(3); j++ {
			s.WriteString(alpha[r.Intn(len(alpha))])
		}
		src := "version: 1\npackage: locks\nlocks:\n  A:\n    key: '" + k.String() + "'\n    params: {t: string, id: int64}\n    slot: '" + s.String() + "'\n"
		spec, err := Parse("locks.yaml", []byte(src))
		if err != nil {
			continue
		}
		l := spec.Locks[0]
		got := l.key()
		var params []string
		var lit strings.Builder
		for _, seg := range got.Segments {
			if seg.Param != "" {
				params = append(params, seg.Param)
			}
			lit.WriteString(seg.Lit)
		}
		var want []string
		want = append(want, l.Key.Params()...)
		okParams := true
		for _, p := range want {
			found := false
			for _, q := range params {
				if p == q {
					found = true
				}
			}
			okParams = okParams && found
		}
		braces := strings.Count(lit.String(), "{") == 1 && strings.Count(lit.String(), "}") == 1
		if !okParams || !braces {
			bad++
			t.Errorf("key %q slot %q renders %q: segments %+v", k.String(), s.String(), got.Text, got.Segments)
		}
	}
}
