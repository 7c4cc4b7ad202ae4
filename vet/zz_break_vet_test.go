package vet_test

import (
	"path/filepath"

	"github.com/lockgen/lockgen"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/lockgen/lockgen/vet"
)

func TestZZEscapeCarried(t *testing.T) {
	dir := testModule(t)
	analysistest.Run(t, dir, vet.Analyzer, "./zzbreak")
}

// TestZZWaitTimeZeroIsNoEdge: locks declared waitTime: 0 taken in both
// orders: no inversion expected (only the acquires facts).
func TestZZWaitTimeZeroIsNoEdge(t *testing.T) {
	dir := testModule(t)
	out, err := lockgen.Generate(filepath.Join(dir, "zztry", "tlocks", "locks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write(); err != nil {
		t.Fatal(err)
	}
	analysistest.Run(t, dir, vet.Analyzer, "./zztry")
}
