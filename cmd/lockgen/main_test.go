package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// tempModule makes a module that uses this repository via replace, so
// generated code and go/packages resolve there.
func tempModule(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module example.com/app\n\ngo 1.24\n\nrequire github.com/lockgen/lockgen v0.0.0\n\nreplace github.com/lockgen/lockgen => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOWORK", "off")
	return dir
}

func TestCheckPassesOnTheCommittedExample(t *testing.T) {
	code, out, errOut := runCLI(t, "check", "-config", "../../example/locks.yaml")
	if code != exitOK {
		t.Fatalf("check exited %d\n%s%s", code, out, errOut)
	}
}

// TestInitWritesAStarterThatGeneratesAndChecks follows the README in a
// fresh module: init -config internal/locks/locks.yaml makes the folders
// (issue 26), then check, generate and check again.
func TestInitWritesAStarterThatGeneratesAndChecks(t *testing.T) {
	dir := tempModule(t)
	config := filepath.Join(dir, "internal", "locks", "locks.yaml")
	if code, _, errOut := runCLI(t, "init", "-config", config); code != exitOK {
		t.Fatalf("init exited %d: %s", code, errOut)
	}
	if spec, err := os.ReadFile(config); err != nil || !bytes.Equal(spec, starter) {
		t.Fatalf("init did not write the starter (%v)", err)
	}
	if schema, err := os.ReadFile(filepath.Join(dir, "internal", "locks", "locks.schema.json")); err != nil || !bytes.Equal(schema, lockgen.Schema) {
		t.Fatalf("init did not write the schema beside the spec (%v)", err)
	}
	if err := os.WriteFile(config, []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "init", "-config", config); code != exitFail || !strings.Contains(errOut, "already exists") {
		t.Fatalf("second init exited %d (%s), want 1 and already exists", code, errOut)
	}
	if spec, _ := os.ReadFile(config); string(spec) != "# mine\n" {
		t.Fatalf("second init replaced the user's spec with %q", spec)
	}
	if err := os.WriteFile(config, starter, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "check", "-config", config); code != exitFail || !strings.Contains(errOut, "stale or missing") {
		t.Fatalf("check before generate exited %d (%s), want 1", code, errOut)
	}
	if code, out, errOut := runCLI(t, "-config", config); code != exitOK || !strings.Contains(out, "wrote") {
		t.Fatalf("generate exited %d: %s%s", code, out, errOut)
	}
	gen := filepath.Join(dir, "internal", "locks", "locks_gen.go")
	info, err := os.Stat(gen)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCLI(t, "generate", "-config", config); code != exitOK || out != "" {
		t.Fatalf("second generate exited %d and said %q, want 0 and silence", code, out)
	}
	if again, _ := os.Stat(gen); !again.ModTime().Equal(info.ModTime()) {
		t.Errorf("unchanged file was rewritten")
	}
	if code, out, errOut := runCLI(t, "check", "-config", config); code != exitOK {
		t.Fatalf("check after generate exited %d: %s%s", code, out, errOut)
	}
}

func TestCheckPrintsAUnifiedDiffWhenStale(t *testing.T) {
	dir := tempModule(t)
	config := filepath.Join(dir, "locks.yaml")
	spec := "version: 1\npackage: app\nlocks:\n  OrderLock: {key: \"order:${id}\", params: {id: int64}}\n"
	if err := os.WriteFile(config, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "generate", "-config", config); code != exitOK {
		t.Fatalf("generate exited %d: %s", code, errOut)
	}
	stale := strings.Replace(spec, "order:", "orders:", 1)
	if err := os.WriteFile(config, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "check", "-config", config)
	if code != exitFail {
		t.Fatalf("check exited %d, want 1", code)
	}
	for _, want := range []string{"--- a/", "+++ b/", "@@ -", `-	return "order:" +`, `+	return "orders:" +`} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
}

func TestSpecErrorsExitTwoWithPositions(t *testing.T) {
	dir := tempModule(t)
	config := filepath.Join(dir, "locks.yaml")
	if err := os.WriteFile(config, []byte("version: 1\npackage: app\nlocks:\n  OrderLock: {key: \"order:${id}\", params: {id: int64}, lease: 30}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "-config", config)
	want := config + `:4:63: locks.OrderLock.lease: "30" is not a duration (add a unit: 30s or 30ms)` + "\n"
	if code != exitUsage || errOut != want {
		t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errOut, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "locks_gen.go")); !os.IsNotExist(err) {
		t.Errorf("a spec with errors wrote a file")
	}
}

// TestExitCodesAreTheREADMEs runs every command the ways the README's
// exit codes name: 2 for usage (an unknown command or flag, a stray
// argument, a -config that names no file, a missing required flag), 1 for
// a failed run.
func TestExitCodesAreTheREADMEs(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	spec := filepath.Join(dir, "locks.yaml")
	if err := os.WriteFile(spec, []byte("version: 1\npackage: app\nlocks:\n  OrderLock: {key: \"order:${id}\", params: {id: int64}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notADir := filepath.Join(spec, "locks.yaml") // a path through a file
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"frobnicate"}, exitUsage},
		{[]string{"help", "frobnicate"}, exitUsage},
		{[]string{"-nope"}, exitUsage},
		{[]string{"generate", "-nope"}, exitUsage},
		{[]string{"check", "-nope"}, exitUsage},
		{[]string{"init", "-nope"}, exitUsage},
		{[]string{"schema", "-nope"}, exitUsage},
		{[]string{"vet", "-nope"}, exitUsage},
		{[]string{"inspect", "-nope"}, exitUsage},
		{[]string{"version", "-nope"}, exitUsage},
		{[]string{"generate", "extra"}, exitUsage},
		{[]string{"check", "extra"}, exitUsage},
		{[]string{"init", "extra"}, exitUsage},
		{[]string{"schema", "extra"}, exitUsage},
		{[]string{"version", "extra"}, exitUsage},
		{[]string{"inspect", "-config", spec, "OrderLock", "noequals"}, exitUsage},
		{[]string{"-config", missing}, exitUsage},
		{[]string{"generate", "-config", missing}, exitUsage},
		{[]string{"check", "-config", missing}, exitUsage},
		{[]string{"inspect", "-config", missing, "-redis", "redis://127.0.0.1:1"}, exitUsage},
		{[]string{"inspect", "-config", spec}, exitUsage}, // no -redis
		{[]string{"-config", dir}, exitUsage},             // a directory
		{[]string{"check", "-config", dir}, exitUsage},
		{[]string{"inspect", "-config", dir, "-redis", "redis://127.0.0.1:1"}, exitUsage},
		{[]string{"init", "-config", dir}, exitUsage},
		{[]string{"init", "-config", notADir}, exitUsage}, // below a file
		{[]string{"init", "-config", spec}, exitFail},     // exists: never replaced
		{[]string{"help"}, exitOK},
		{[]string{"help", "init"}, exitOK},
		{[]string{"init", "-h"}, exitOK},
	} {
		if code, _, errOut := runCLI(t, c.args...); code != c.want {
			t.Errorf("lockgen %s exited %d, want %d (%s)", strings.Join(c.args, " "), code, c.want, strings.TrimSpace(errOut))
		}
	}
}

func TestSchemaPrintsJSONAndVersionPrintsAVersion(t *testing.T) {
	code, out, _ := runCLI(t, "schema")
	if code != exitOK || !json.Valid([]byte(out)) {
		t.Fatalf("schema exited %d, valid JSON %v", code, json.Valid([]byte(out)))
	}
	code, out, _ = runCLI(t, "version")
	if code != exitOK || !strings.HasPrefix(out, "lockgen ") {
		t.Fatalf("version exited %d: %q", code, out)
	}
}

// TestGoGenerateLeavesAHandWrittenMainAlone is the report of issue 12 end
// to end: go generate runs lockgen (built from this repository) on a spec
// whose output is the module's hand-written cmd/orders/main.go. The run
// must fail with the spec error and leave main.go byte-identical, with
// its modification time, and leave no temporary file behind.
func TestGoGenerateLeavesAHandWrittenMainAlone(t *testing.T) {
	dir := tempModule(t)
	mainGo := "// Command orders serves the order API.\npackage main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"orders\")\n}\n"
	files := map[string]string{
		"internal/locks/locks.yaml":  "version: 1\npackage: main\noutput: ../../cmd/orders/main.go\nlocks:\n  OrderLock: {key: \"order:${id}\", params: {id: int64}}\n",
		"internal/locks/generate.go": "package locks\n\n//go:generate go run github.com/lockgen/lockgen/cmd/lockgen\n",
		"cmd/orders/main.go":         mainGo,
	}
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mainPath := filepath.Join(dir, "cmd", "orders", "main.go")
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(mainPath, old, old); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "generate", "./...")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("go generate succeeded:\n%s", out)
	}
	want := "locks.yaml:3:9: output: ../../cmd/orders/main.go exists and was not generated by lockgen"
	if !strings.Contains(string(out), want) {
		t.Errorf("go generate said:\n%s\nwant it to contain %q", out, want)
	}
	got, err := os.ReadFile(mainPath)
	if err != nil || string(got) != mainGo {
		t.Fatalf("main.go changed (%v):\n%s", err, got)
	}
	if info, err := os.Stat(mainPath); err != nil || !info.ModTime().Equal(old) {
		t.Errorf("main.go was touched: %v %v", info.ModTime(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(mainPath))
	if len(entries) != 1 {
		t.Errorf("cmd/orders holds %d entries, want main.go only", len(entries))
	}
}
