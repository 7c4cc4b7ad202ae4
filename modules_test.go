package lockgen_test

import (
	"go/version"
	"os"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestOtelModuleNeedsNoNewerGoThanTheMain: a service that can build the
// main module must be able to add the otel module without a newer Go
// (issue 26). The go command keeps a module's go line at or above its
// dependencies', so this also bounds the OpenTelemetry versions it needs.
func TestOtelModuleNeedsNoNewerGoThanTheMain(t *testing.T) {
	main, otel := goLine(t, "go.mod"), goLine(t, "otel/go.mod")
	if version.Compare("go"+otel, "go"+main) > 0 {
		t.Errorf("otel/go.mod says go %s, the main module go %s: lower otel's (go get go@%s in otel/ downgrades what needs more)", otel, main, main)
	}
}

func goLine(t *testing.T, path string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(path, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Go == nil {
		t.Fatalf("%s has no go line", path)
	}
	return f.Go.Version
}
