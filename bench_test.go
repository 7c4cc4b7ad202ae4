package lockgen_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockgen/lockgen"
)

// BenchmarkGenerate1000Locks runs the whole pipeline on a 1,000-lock spec
// (parse, validate, go/packages with a user type, render, write) and
// checks that every run produces the same bytes. Target: well under 2s/op.
func BenchmarkGenerate1000Locks(b *testing.B) {
	root, err := filepath.Abs(".")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	var spec strings.Builder
	spec.WriteString("version: 1\npackage: locks\nlocks:\n")
	for i := range 1000 {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&spec, "  Order%dLock:\n    doc: Lock %d.\n    key: \"order%d:${orderID}\"\n    params: {orderID: int64}\n    waitTime: 3s\n", i, i, i)
		case 1:
			fmt.Fprintf(&spec, "  Stock%dLock:\n    key: \"stock%d:${warehouse}:${sku}\"\n    params: {warehouse: uint16, sku: string}\n    lease: 2s\n", i, i)
		case 2:
			fmt.Fprintf(&spec, "  Report%dLock:\n    key: \"report%d:${tenant}:${month}\"\n    params: {tenant: string, month: uint8}\n    slot: \"${tenant}\"\n", i, i)
		default:
			fmt.Fprintf(&spec, "  Account%dLock:\n    key: \"account%d:${id}\"\n    params: {id: example.com/goldens/domain.AccountID}\n    waitTime: forever\n", i, i)
		}
	}
	mod := "module example.com/goldens\n\ngo 1.24\n\nrequire github.com/lockgen/lockgen v0.0.0\n\nreplace github.com/lockgen/lockgen => " + root + "\n"
	for name, src := range map[string]string{
		"go.mod":           mod,
		"domain/domain.go": "package domain\n\ntype AccountID string\n",
		"locks/locks.yaml": spec.String(),
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Setenv("GOFLAGS", "-mod=mod")
	b.Setenv("GOWORK", "off")
	path := filepath.Join(dir, "locks", "locks.yaml")
	var first []byte
	for b.Loop() {
		out, err := lockgen.Generate(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := out.Write(); err != nil {
			b.Fatal(err)
		}
		if first == nil {
			first = out.Content
		} else if !bytes.Equal(first, out.Content) {
			b.Fatal("output differs between runs")
		}
	}
	b.ReportMetric(float64(len(first)), "bytes-generated")
}
