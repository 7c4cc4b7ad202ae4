package lockgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIgnoredNameFollowsGoBuild checks the output file names refused
// because the go tool leaves them out of the package, against go/build's
// rules: a leading _ or ., a _GOOS or _GOARCH suffix (or both), and
// nothing else.
func TestIgnoredNameFollowsGoBuild(t *testing.T) {
	for name, ignored := range map[string]bool{
		"locks_gen.go": false, "locks.go": false, "locks_unix.go": false, "gen_locks.go": false, "windows.go": false,
		"_locks.go": true, ".locks.go": true, "locks_windows.go": true, "locks_linux.go": true, "locks_android.go": true,
		"locks_arm64.go": true, "locks_amd64.go": true, "locks_linux_amd64.go": true, "locks_js.go": true, "locks_wasm.go": true,
	} {
		if got := ignoredName(name) != ""; got != ignored {
			t.Errorf("%s: ignored %v, want %v", name, got, ignored)
		}
	}
}

// TestAnOutputPackageNotFoundSaysWhatTheGoCommandSaid renders a spec whose
// output the go command leaves out (set past Parse, which refuses such a
// name): the error says why the package was not found, not only that.
func TestAnOutputPackageNotFoundSaysWhatTheGoCommandSaid(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "locks.yaml")
	s, err := Parse(file, []byte("version: 1\npackage: locks\noutput: gen/locks_gen.go\nlocks:\n  A: {key: a}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s.Output = "gen/_locks_gen.go"
	_, err = Render(s)
	if err == nil || !strings.Contains(err.Error(), "cannot find the Go package of "+filepath.Join(dir, "gen")+": ") {
		t.Errorf("got %v, want the go command's reason after the directory", err)
	}
}

// TestOutputDirectoryMustBeAnImportPath: an output directory the go
// command cannot import (a space, non-ASCII, @, or under vendor/) is a
// spec error at output; it used to fail with the go command's raw text.
func TestOutputDirectoryMustBeAnImportPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "locks.yaml")
	for _, out := range []string{"my dir/locks_gen.go", "ünï/locks_gen.go", "a@b/locks_gen.go", "vendor/x/locks_gen.go", "x/vendor/locks_gen.go"} {
		src := "version: 1\npackage: x\noutput: \"" + out + "\"\nlocks:\n  A:\n    key: \"a:${id}\"\n    params: {id: int64}\n"
		s, err := Parse(file, []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Render(s)
		if _, ok := err.(ErrorList); !ok || !strings.Contains(err.Error(), "locks.yaml:3:9: output: ") || !strings.Contains(err.Error(), "cannot import") {
			t.Errorf("%s: got %T %v, want a spec error at output (3:9)", out, err, err)
		}
	}
}
