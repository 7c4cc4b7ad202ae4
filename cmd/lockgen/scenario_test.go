package main

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the stdout and stderr sections of testdata/scenarios/*.txtar")

// TestScenarios runs the command on every testdata/scenarios/*.txtar: the
// archive's files are written to a fresh directory, the command runs there
// with the arguments of the archive's "args:" line (file names starting
// with ../ land beside that directory), and its exit code,
// stdout and stderr must be those of the "exit:" line and the "stdout" and
// "stderr" sections ($WORK stands for the directory; "ignore: stdout"
// skips one). "symlink: a -> b" lines make links before the run. When the command fails, every file must
// be left byte-identical and no file added: a refused run writes nothing.
//
// go test -run TestScenarios -update rewrites the expected output.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios (%v)", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			runScenario(t, file, root)
		})
	}
}

type scenario struct {
	args     []string
	exit     int
	symlinks [][2]string
	ignore   map[string]bool // "stdout" or "stderr": not compared
}

func parseScenario(t *testing.T, comment []byte) scenario {
	t.Helper()
	sc := scenario{ignore: map[string]bool{}}
	for _, line := range strings.Split(string(comment), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "args":
			sc.args = strings.Fields(val)
		case "exit":
			n, err := strconv.Atoi(val)
			if err != nil {
				t.Fatalf("exit: %v", err)
			}
			sc.exit = n
		case "ignore":
			sc.ignore[val] = true
		case "symlink":
			from, to, ok := strings.Cut(val, " -> ")
			if !ok {
				t.Fatalf("symlink %q: want path -> target", val)
			}
			sc.symlinks = append(sc.symlinks, [2]string{from, to})
		}
	}
	return sc
}

func runScenario(t *testing.T, file, root string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sc := parseScenario(t, ar.Comment)
	// The files go one level down, so a link may lead out of the work
	// directory without leaving the test's temporary directory.
	work := filepath.Join(t.TempDir(), "work")
	want := map[string]string{}
	for _, f := range ar.Files {
		if f.Name == "stdout" || f.Name == "stderr" {
			want[f.Name] = string(f.Data)
			continue
		}
		data := bytes.ReplaceAll(f.Data, []byte("$LOCKGEN"), []byte(root))
		p := filepath.Join(work, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range sc.symlinks {
		p := filepath.Join(work, filepath.FromSlash(l[0]))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.FromSlash(l[1]), p); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("cannot make symbolic links under CI: %v", err)
			}
			t.Skipf("cannot make symbolic links here: %v", err)
		}
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, filepath.Dir(work))
	t.Chdir(work)
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOWORK", "off")

	code, stdout, stderr := runCLI(t, sc.args...)
	real, _ := filepath.EvalSymlinks(work)
	clean := func(s string) string {
		s = strings.ReplaceAll(s, real, "$WORK")
		return strings.ReplaceAll(s, work, "$WORK")
	}
	got := map[string]string{"stdout": clean(stdout), "stderr": clean(stderr)}
	for name := range sc.ignore {
		delete(got, name)
	}
	if *update {
		for i := range ar.Files {
			if v, ok := got[ar.Files[i].Name]; ok {
				ar.Files[i].Data = []byte(v)
				delete(got, ar.Files[i].Name)
			}
		}
		for _, name := range []string{"stdout", "stderr"} {
			if v, ok := got[name]; ok && v != "" {
				ar.Files = append(ar.Files, txtar.File{Name: name, Data: []byte(v)})
			}
		}
		if err := os.WriteFile(filepath.Join(root, "cmd", "lockgen", file), txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		for _, name := range []string{"stdout", "stderr"} {
			if sc.ignore[name] {
				continue
			}
			if got[name] != want[name] {
				t.Errorf("%s:\n%s\nwant:\n%s", name, got[name], want[name])
			}
		}
	}
	if code != sc.exit {
		t.Errorf("exit %d, want %d", code, sc.exit)
	}
	if code == exitOK {
		return
	}
	after := snapshot(t, filepath.Dir(work))
	for name, data := range before {
		if a, ok := after[name]; !ok {
			t.Errorf("%s was removed", name)
		} else if !bytes.Equal(a, data) {
			t.Errorf("%s was changed by a failed run:\n%s", name, a)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("a failed run created %s", name)
		}
	}
}

// snapshot reads every file below dir (links as their targets' names).
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			files[rel] = []byte("-> " + target)
			return err
		case d.IsDir():
			return nil
		}
		data, err := os.ReadFile(p)
		files[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
