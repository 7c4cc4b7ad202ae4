package lockgen

import (
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
)

var (
	zzNames  = []string{"A", "B", "L", "M", "Err", "Ctx", "Fn", "Key", "KeyPart", "New", "Locks", "With", "WithA", "Arm", "ArmA", "Await", "CountDown", "Options", "AKey", "AOptions", "Order", "OrderLock", "H", "C", "S", "V", "Ärger", "Ωmega", "K1", "Å", "X_Y", "String", "Error", "Read", "Write", "Do", "Value"}
	zzParams = []string{"id", "h", "h_", "hText", "c", "s", "v", "fence", "a", "aKey", "aOptions", "orderKey", "txt", "n", "x", "ä", "ω", "t", "keyEscaper2", "Locks", "New", "A", "WithA", "idText", "lText", "l_"}
	zzTypes  = []string{"string", "int64", "int", "uint8", "byte", "rune", "bool", "uint64", "int8"}
	zzKinds  = []string{"reentrant", "fair", "readwrite", "red", "semaphore", "latch", "multi", "multi"}
)

func zzRandomSpec(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("version: 1\npackage: locks\nlocks:\n")
	n := 1 + r.Intn(5)
	used := map[string]bool{}
	var names []string
	for len(names) < n {
		nm := zzNames[r.Intn(len(zzNames))]
		if !used[nm] {
			used[nm] = true
			names = append(names, nm)
		}
	}
	for i, nm := range names {
		kind := zzKinds[r.Intn(len(zzKinds))]
		fmt.Fprintf(&b, "  %s:\n    kind: %s\n", nm, kind)
		if kind == "multi" {
			var ms []string
			for _, o := range names {
				if o != nm && r.Intn(2) == 0 {
					ms = append(ms, o)
				}
			}
			fmt.Fprintf(&b, "    members: [%s]\n", strings.Join(ms, ", "))
			if r.Intn(3) == 0 {
				b.WriteString("    atomic: true\n")
			}
			continue
		}
		np := r.Intn(4)
		pu := map[string]bool{}
		var ps []string
		for len(ps) < np {
			p := zzParams[r.Intn(len(zzParams))]
			if !pu[p] {
				pu[p] = true
				ps = append(ps, p)
			}
		}
		key := fmt.Sprintf("k%d", i)
		var decl []string
		for _, p := range ps {
			key += ":${" + p + "}"
			decl = append(decl, p+": "+zzTypes[r.Intn(len(zzTypes))])
		}
		if r.Intn(4) == 0 && len(ps) > 0 {
			key = "{" + key + "}"
		}
		fmt.Fprintf(&b, "    key: \"%s\"\n", key)
		if len(decl) > 0 {
			fmt.Fprintf(&b, "    params: {%s}\n", strings.Join(decl, ", "))
		}
		switch kind {
		case "semaphore":
			b.WriteString("    permits: 3\n")
		case "latch":
			b.WriteString("    count: 2\n")
		case "reentrant":
			if r.Intn(3) == 0 {
				b.WriteString("    fenced: true\n")
			}
		}
	}
	return b.String()
}

func TestZZRandomSpecsTypeCheck(t *testing.T) {
	if os.Getenv("ZZ_RANDOM") == "" {
		t.Skip("set ZZ_RANDOM=n")
	}
	zzLoad(t)
	var iters int
	fmt.Sscan(os.Getenv("ZZ_RANDOM"), &iters)
	r := rand.New(rand.NewSource(int64(iters)))
	accepted, failures := 0, 0
	seen := map[string]bool{}
	for i := 0; i < iters; i++ {
		src := zzRandomSpec(r)
		_, err, ok := zzTypeCheck(t, []byte(src))
		if !ok {
			continue
		}
		accepted++
		if err != nil {
			msg := err.Error()
			if i := strings.Index(msg, ": "); i > 0 {
				msg = msg[i:]
			}
			if !seen[msg] {
				seen[msg] = true
				failures++
				t.Errorf("accepted spec does not type-check: %v\n%s", err, src)
			}
			if failures > 8 {
				break
			}
		}
	}
	t.Logf("%d accepted of %d", accepted, iters)
}
