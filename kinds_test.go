package lockgen

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"slices"
	"testing"

	"github.com/lockgen/lockgen/templates"
)

// TestEveryKindRenders keeps the kinds of the DSL and the templates'
// emitters in step: a kind that validates must also render.
func TestEveryKindRenders(t *testing.T) {
	for _, k := range Kinds {
		lock := "  ALock: {kind: " + string(k) + ", key: a}\n"
		switch k {
		case Multi:
			lock = "  B: {key: b}\n  C: {key: c}\n  ALock: {kind: multi, members: [B, C]}\n"
		case Semaphore:
			lock = "  ALock: {kind: semaphore, key: a, permits: 2}\n"
		case Latch:
			lock = "  ALock: {kind: latch, key: a, count: 2}\n"
		}
		spec, err := Parse("locks.yaml", []byte("version: 1\npackage: p\nlocks:\n"+lock))
		if err != nil {
			t.Errorf("%s: %v", k, err)
			continue
		}
		f := templates.File{Path: "example.com/p", Package: "p", Source: "locks.yaml"}
		for _, l := range spec.Locks {
			f.Locks = append(f.Locks, lockModel(l))
		}
		if _, err := templates.Emit(f); err != nil {
			t.Errorf("%s validates but does not render: %v", k, err)
		}
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

// TestMethodNamesAreTheMethodsEachKindGenerates keeps methodNames, which
// the name checks use, equal to the methods on *Locks the templates emit
// for each kind (and a fenced lock): a latch has Arm<Name>, Await<Name>
// and CountDown<Name>, and no With<Name>.
func TestMethodNamesAreTheMethodsEachKindGenerates(t *testing.T) {
	locks := map[string]string{
		"fenced":    "  ALock: {key: a, fenced: true}\n",
		"multi":     "  B: {key: b}\n  C: {key: c}\n  ALock: {kind: multi, members: [B, C]}\n",
		"semaphore": "  ALock: {kind: semaphore, key: a, permits: 2}\n",
		"latch":     "  ALock: {kind: latch, key: a, count: 2}\n",
	}
	for _, k := range Kinds {
		if locks[string(k)] == "" {
			locks[string(k)] = "  ALock: {kind: " + string(k) + ", key: a}\n"
		}
	}
	for name, lock := range locks {
		spec, err := Parse("locks.yaml", []byte("version: 1\npackage: p\nlocks:\n"+lock))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		f := templates.File{Path: "example.com/p", Package: "p", Source: "locks.yaml"}
		var want []string
		for _, l := range spec.Locks {
			f.Locks = append(f.Locks, lockModel(l))
			want = append(want, methodNames(l)...)
		}
		src, err := templates.Emit(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		file, err := goparser.ParseFile(token.NewFileSet(), "locks_gen.go", src, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
				if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok && star.X.(*ast.Ident).Name == "Locks" {
					got = append(got, fd.Name.Name)
				}
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the templates emit the methods %v on *Locks, methodNames says %v", name, got, want)
		}
	}
}
