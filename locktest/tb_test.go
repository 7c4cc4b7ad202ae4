package locktest_test

import (
	"fmt"
	"strings"
	"sync"
)

// fakeT stands in for a test's *testing.T where there is none (in an
// Example) or where a test watches what locktest does with its t: it keeps
// the log, runs the cleanups when the "test" ends, and panics on Fatalf.
type fakeT struct {
	mu       sync.Mutex
	logs     []string
	cleanups []func()
}

func newT() *fakeT { return &fakeT{} }

func (t *fakeT) Helper() {}

func (t *fakeT) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logs = append(t.logs, fmt.Sprintf(format, args...))
}

// fatal is what Fatalf panics with.
type fatal string

func (t *fakeT) Fatalf(format string, args ...any) { panic(fatal(fmt.Sprintf(format, args...))) }

func (t *fakeT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// end runs the cleanups, the last registered first, as a test's end does.
func (t *fakeT) end() {
	t.mu.Lock()
	cleanups := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}

func (t *fakeT) log() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.logs, "\n")
}
