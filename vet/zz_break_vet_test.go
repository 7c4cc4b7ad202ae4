package vet_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/lockgen/lockgen/vet"
)

func TestZZEscapeCarried(t *testing.T) {
	dir := testModule(t)
	analysistest.Run(t, dir, vet.Analyzer, "./zzbreak")
}
