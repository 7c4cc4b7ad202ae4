package locktest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTheTestingDocQuotesTheseTests keeps docs/testing.md honest: each of
// its Go snippets is code of this package's tests, which compile and run.
// Indentation is not compared (a snippet may come from inside a function).
func TestTheTestingDocQuotesTheseTests(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("*_test.go")
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.WriteString(unindent(string(b)))
	}
	snippets := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(snippets) == 0 {
		t.Fatal("docs/testing.md has no Go snippet")
	}
	for _, s := range snippets {
		if !strings.Contains(src.String(), unindent(s[1])) {
			t.Errorf("this snippet of docs/testing.md is not in locktest's tests:\n%s", s[1])
		}
	}
}

// unindent drops the leading tabs of every line.
func unindent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, "\t")
	}
	return strings.Join(lines, "\n")
}
