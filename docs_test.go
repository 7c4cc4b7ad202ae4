package lockgen_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/lockgen/lockgen"
)

// TestTheREADMENamesEveryKind: the README's sentence on kind names every
// kind the spec accepts, and no other (issue 26: docs left kinds out).
func TestTheREADMENamesEveryKind(t *testing.T) {
	src, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(src)), " ")
	m := regexp.MustCompile("`kind` is one of ([^;]*);").FindStringSubmatch(text)
	if m == nil {
		t.Fatal("README.md has no sentence \"`kind` is one of ...;\"")
	}
	var named []string
	for _, q := range regexp.MustCompile("`([a-z]+)`").FindAllStringSubmatch(m[1], -1) {
		named = append(named, q[1])
	}
	var want []string
	for _, k := range lockgen.Kinds {
		want = append(want, string(k))
	}
	if strings.Join(named, " ") != strings.Join(want, " ") {
		t.Errorf("README.md names the kinds %v, want %v (in that order)", named, want)
	}
}
