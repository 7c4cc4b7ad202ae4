package lockgen_test

import (
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/lockgen/lockgen"
)

// TestPlainGoDocOfTheExampleTablesEveryLock runs go doc (without -all) on
// the committed example/gen and checks that it shows a row for every lock
// of example/locks.yaml with its kind: the review the README promises.
func TestPlainGoDocOfTheExampleTablesEveryLock(t *testing.T) {
	src, err := os.ReadFile("example/locks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := lockgen.Parse("example/locks.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "doc", "./example/gen").CombinedOutput()
	if err != nil {
		t.Fatalf("go doc: %v\n%s", err, out)
	}
	for _, l := range spec.Locks {
		row := regexp.MustCompile(`(?m)^\s+` + l.Name + `\s+` + string(l.Kind) + `\s`)
		if !row.Match(out) {
			t.Errorf("go doc ./example/gen has no row for %s (%s):\n%s", l.Name, l.Kind, out)
		}
	}
}
