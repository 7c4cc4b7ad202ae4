package vet_test

import (
	"fmt"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/lockgen/lockgen"
	"github.com/lockgen/lockgen/vet"
)

// testModule copies testdata/src into a module that uses this repository
// (by replace) and generates its locks package from locks.yaml, so the
// tests run on code exactly as lockgen generates it today.
func testModule(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err = filepath.WalkDir("testdata/src", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("testdata/src", path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	mod := "module example.com/vettest\n\ngo 1.24\n\nrequire github.com/lockgen/lockgen v0.0.0\n\nreplace github.com/lockgen/lockgen => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Set before generating: a param of a user type is resolved with the
	// go command, in this module.
	t.Setenv("GOFLAGS", "-mod=mod")
	out, err := lockgen.Generate(filepath.Join(dir, "locks", "locks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAnalyzer runs the analyzer on the packages of testdata/src and
// checks its findings and facts against their // want comments (which
// see only a finding's first line), then how findings print.
func TestAnalyzer(t *testing.T) {
	dir := testModule(t)
	pkgs := []string{"order", "helper", "cross/a", "cross/b", "linked/app", "linked/quiet", "multi", "ctxuse", "unlock", "clean", "direct", "fenced", "permits", "nested", "nested/ledger", "trylock", "value", "alias", "rtnowait", "rtkey", "methodexpr", "pkgvar", "branches", "linedir", "escwait", "rwfirst", "unlockfn", "rtname", "lockfail"}
	for i, p := range pkgs {
		pkgs[i] = "./" + p
	}
	results := analysistest.Run(t, dir, vet.Analyzer, pkgs...)
	t.Run("FindingsPrintTheirDetailOnLinesOfTheirOwn", func(t *testing.T) {
		printed := printPlain(dir, results)
		for _, want := range []string{
			// A nested instance, directly: the fix names both handles.
			`nested/nested.go:29:10: nested instances of one lock: locks.OrderLock(to) is taken while locks.OrderLock(from) is held (take both in one multi lock, or in a fixed order)
nested/nested.go:28:9: 	locks.OrderLock(from) is taken here: with a caller that takes the two the other way round, each holds one and waits for the other until their wait times run out
nested/nested.go:29:10: 	fix: c.MultiLock(opts, l.OrderLock(from), l.OrderLock(to)) takes both in key order; or take them in a fixed order (say, the lower first) and say so with //lockgen:ignore <reason>
`,
			// Through a call into another package: the instance is the
			// caller's argument, and a note points into the callee.
			`nested/nested.go:53:10: nested instances of one lock: locks.OrderLock(to) is taken while locks.OrderLock(from) is held (take both in one multi lock, or in a fixed order)
nested/nested.go:49:9: 	locks.OrderLock(from) is taken here: with a caller that takes the two the other way round, each holds one and waits for the other until their wait times run out
nested/ledger/ledger.go:13:9: 	through ledger.Post, which takes locks.OrderLock here
`,
			// A fenced lock cannot be a multi lock's member.
			`nested/nested.go:22:10: nested instances of one lock: locks.LedgerLock(to) is taken while locks.LedgerLock(from) is held (take them in a fixed order)
nested/nested.go:21:9: 	locks.LedgerLock(from) is taken here: with a caller that takes the two the other way round, each holds one and waits for the other until their wait times run out
nested/nested.go:22:10: 	fix: a fenced lock cannot be a multi lock member (it would be taken without its token): take them in a fixed order (say, the lower first) and say so with //lockgen:ignore <reason>
`,
			// An inversion through helpers: the held lock, each side's
			// helper, and why it deadlocks.
			`helper/helper.go:29:10: lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held, and elsewhere the other way round (take both in one multi lock, or in one order everywhere)
helper/helper.go:28:9: 	locks.OrderLock is taken here
helper/helper.go:17:9: 	through helper.Service.reserve, which takes locks.InventoryLock here
helper/helper.go:35:10: 	locks.OrderLock is taken while locks.InventoryLock is held: two callers can each hold one and wait for the other until their wait times run out
helper/helper.go:21:71: 	through helper.Service.touch, which takes locks.OrderLock here
`,
			// A cycle that only the importer sees: its notes point into
			// the imported packages.
			`linked/app/app.go:9:2: lock-order inversion in imported packages that this package links: locks.PaymentLock is taken while locks.OrderLock is held, and elsewhere the other way round (take both in one multi lock, or in one order everywhere)
linked/x/x.go:11:9: 	locks.OrderLock is taken here
linked/x/x.go:12:10: 	locks.PaymentLock is taken while locks.OrderLock is held
linked/y/y.go:12:10: 	locks.OrderLock is taken while locks.PaymentLock is held: two callers can each hold one and wait for the other until their wait times run out
`,
			// Under //line directives: the finding and its notes at the
			// template's lines (which name no column).
			`linedir/handlers.tmpl:3:0: lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held, and elsewhere the other way round (take both in one multi lock, or in one order everywhere)
linedir/handlers.tmpl:2:0: 	locks.OrderLock is taken here
linedir/handlers.tmpl:102:0: 	locks.OrderLock is taken while locks.InventoryLock is held: two callers can each hold one and wait for the other until their wait times run out
`,
			// A hold's ctx named ctx is not "the hold's ctx ctx".
			`ctxuse/ctxuse.go:24:32: locks.InventoryLock is taken with ctx inside the critical section of locks.OrderLock: pass hctx, the hold's ctx
ctxuse/ctxuse.go:23:9: 	locks.OrderLock is taken here; ctx does not carry its hold, so the call re-enters no lock held here, and losing locks.OrderLock does not cancel it
`,
		} {
			if !strings.Contains(printed, want) {
				t.Errorf("printed findings lack\n%s\nall of them:\n%s", want, printed)
			}
		}
		for _, line := range strings.Split(printed, "\n") {
			if _, msg, _ := strings.Cut(line, ": "); len(msg) > 240 {
				t.Errorf("a line of %d characters (want at most 240):\n%s", len(msg), line)
			}
		}
	})
}

// printPlain prints the findings as go vet does: file:line:col: message,
// and each related position on a line of its own, its message indented
// by a tab; files relative to dir.
func printPlain(dir string, results []*analysistest.Result) string {
	var b strings.Builder
	for _, r := range results {
		fset := r.Action.Package.Fset
		print := func(pos token.Pos, msg string) {
			p := fset.Position(pos)
			rel, _ := filepath.Rel(dir, p.Filename)
			fmt.Fprintf(&b, "%s:%d:%d: %s\n", filepath.ToSlash(rel), p.Line, p.Column, msg)
		}
		for _, d := range r.Action.Diagnostics {
			print(d.Pos, d.Message)
			for _, n := range d.Related {
				print(n.Pos, "\t"+n.Message)
			}
		}
	}
	return b.String()
}
