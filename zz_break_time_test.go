package lockgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// time.Time is accepted as a key param and rendered with String(), which
// carries the monotonic clock reading (m=+0.000274873) of the process that
// made the value, and its location name: equal instants (t.Equal) render
// different keys in different processes, so the lock excludes no one.
// MarshalText (RFC 3339, UTC-offset, no monotonic part) is there too.
func TestZZTimeParamRendersMonotonicString(t *testing.T) {
	root, _ := filepath.Abs(".")
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":     "module example.com/m\n\ngo 1.24\n\nrequire github.com/lockgen/lockgen v0.0.0\n\nreplace github.com/lockgen/lockgen => " + root + "\n",
		"locks.yaml": "version: 1\npackage: locks\nlocks:\n  Day:\n    key: \"day:${at}\"\n    params: {at: time.Time}\n",
	}
	for n, s := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := Generate(filepath.Join(dir, "locks.yaml"))
	if err != nil {
		t.Logf("rejected (fixed?): %v", err)
		return
	}
	if strings.Contains(string(out.Content), "at.String()") {
		t.Errorf("time.Time is rendered with String(), which includes the monotonic reading and zone name: equal instants give different keys")
	}
}
