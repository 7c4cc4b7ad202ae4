package lockgen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// zzModule writes a module example.com/m (requiring this repository) with
// files, generates from locks.yaml and returns the go build error output,
// or "" when the spec was rejected (rejected is the error then).
func zzGenerateAndBuild(t *testing.T, files map[string]string) (buildOut string, rejected error) {
	t.Helper()
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module example.com/m\n\ngo 1.24\n\nrequire github.com/lockgen/lockgen v0.0.0\n\nreplace github.com/lockgen/lockgen => " + root + "\n"
	files["go.mod"] = mod
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files["go.sum"] = string(sum)
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := Generate(filepath.Join(dir, "locks.yaml"))
	if err != nil {
		return "", err
	}
	if _, err := out.Write(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	b, err := cmd.CombinedOutput()
	if err != nil {
		return strings.TrimSpace(string(b)), nil
	}
	return "", nil
}

func zzExpectRejectedOrBuilds(t *testing.T, files map[string]string) {
	t.Helper()
	build, rejected := zzGenerateAndBuild(t, files)
	if rejected != nil {
		t.Logf("rejected (good): %v", rejected)
		return
	}
	if build != "" {
		t.Errorf("lockgen accepted the spec, but the generated code does not build:\n%s", build)
	}
}

// A param type from a package main: lockgen accepts it, the generated file
// imports a program.
func TestZZParamTypeFromMainPackage(t *testing.T) {
	zzExpectRejectedOrBuilds(t, map[string]string{
		"locks.yaml": "version: 1\npackage: locks\nlocks:\n  A:\n    key: \"a:${n}\"\n    params: {n: example.com/m/cmd/tool.T}\n",
		"cmd/tool/main.go": "package main\n\ntype T string\n\nfunc main() {}\n",
	})
}

// A param type from an internal package the output package may not import.
func TestZZParamTypeFromForeignInternalPackage(t *testing.T) {
	zzExpectRejectedOrBuilds(t, map[string]string{
		"locks.yaml": "version: 1\npackage: locks\noutput: gen/locks_gen.go\nlocks:\n  A:\n    key: \"a:${n}\"\n    params: {n: example.com/m/other/internal/x.T}\n",
		"other/internal/x/x.go": "package x\n\ntype T string\n",
	})
}

// A param type whose package imports the output package: the generated
// import closes a cycle.
func TestZZParamTypeImportCycle(t *testing.T) {
	zzExpectRejectedOrBuilds(t, map[string]string{
		"locks.yaml":  "version: 1\npackage: gen\noutput: gen/locks_gen.go\nlocks:\n  A:\n    key: \"a:${n}\"\n    params: {n: example.com/m/domain.OrderID}\n",
		"gen/other.go": "package gen\n\nconst X = 1\n",
		"domain/d.go": "package domain\n\nimport \"example.com/m/gen\"\n\nvar _ = gen.X\n\ntype OrderID string\n",
	})
}

// Two lock names that differ only in a first letter whose lower case is
// the same (K KELVIN SIGN U+212A and K): the helpers korderKey and
// korderOptions are declared twice.
func TestZZLockNamesFoldToSameHelper(t *testing.T) {
	zzExpectRejectedOrBuilds(t, map[string]string{
		"locks.yaml": "version: 1\npackage: locks\nlocks:\n  Korder:\n    key: \"a:${id}\"\n    params: {id: int64}\n  \u212Aorder:\n    key: \"b:${id}\"\n    params: {id: int64}\n",
	})
}

// package: documentation is a valid identifier, but the go tool ignores
// files of package documentation: the error is not a spec error.
func TestZZPackageDocumentation(t *testing.T) {
	_, rejected := zzGenerateAndBuild(t, map[string]string{
		"locks.yaml": "version: 1\npackage: documentation\nlocks:\n  A:\n    key: \"a:${id}\"\n    params: {id: int64}\n",
	})
	if rejected == nil {
		return
	}
	if _, ok := rejected.(ErrorList); !ok {
		t.Errorf("package: documentation gives a bare error, not locks.yaml:2:10 at package with a fix: %v", rejected)
	}
}

// Output directories the go command cannot make a package of: lockgen
// fails with the go command's text (exit 1), not an error at output.
func TestZZOutputDirNotAnImportPath(t *testing.T) {
	for _, out := range []string{"my dir/locks_gen.go", "ünï/locks_gen.go", "a@b/locks_gen.go", "vendor/x/locks_gen.go"} {
		t.Run(out, func(t *testing.T) {
			_, rejected := zzGenerateAndBuild(t, map[string]string{
				"locks.yaml": "version: 1\npackage: x\noutput: \"" + out + "\"\nlocks:\n  A:\n    key: \"a:${id}\"\n    params: {id: int64}\n",
			})
			if _, ok := rejected.(ErrorList); !ok {
				t.Errorf("want a spec error at locks.yaml:3:9 (output) with a fix, got %T: %v", rejected, firstLine(errString(rejected)))
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
