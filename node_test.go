package lockgen

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The tests in this file drive Node tools pinned in .ci/node/package.json:
// ajv (the JSON Schema validator most editors and CI linters use) and
// yaml-language-server (what VS Code's YAML extension and other editors
// run). They skip only when node is missing and CI is unset; they install
// the tools themselves with npm ci the first time.

var (
	nodeOnce sync.Once
	nodeErr  string
)

// nodeTools returns the directory holding the tools' node_modules.
func nodeTools(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not installed, and CI is set: install nodejs and npm (.ci/run does)")
		}
		t.Skip("node is not installed (these checks run under CI)")
	}
	dir, err := filepath.Abs(filepath.Join(".ci", "node"))
	if err != nil {
		t.Fatal(err)
	}
	nodeOnce.Do(func() {
		lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
		if err != nil {
			nodeErr = err.Error()
			return
		}
		// node_modules/.package-lock.json is npm's record of what it
		// installed: equal to the lock file's packages, nothing to do.
		installed, _ := os.ReadFile(filepath.Join(dir, "node_modules", ".package-lock.json"))
		if sameInstall(lock, installed) {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			nodeErr = "npm ci in .ci/node: " + err.Error() + "\n" + string(out)
		}
	})
	if nodeErr != "" {
		t.Fatal(nodeErr)
	}
	return dir
}

// sameInstall reports whether npm's record of an install matches the lock.
func sameInstall(lock, installed []byte) bool {
	var a, b struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if json.Unmarshal(lock, &a) != nil || json.Unmarshal(installed, &b) != nil || len(b.Packages) == 0 {
		return false
	}
	for name, p := range a.Packages {
		if name == "" {
			continue
		}
		if b.Packages[name].Version != p.Version {
			return false
		}
	}
	return true
}

// TestSchemaPassesAjvStrictModeAndAgrees compiles the schema with ajv in
// strict mode, which must log and throw nothing, and checks that ajv gives
// every spec (see allSpecs) the verdict the Go validator gives.
func TestSchemaPassesAjvStrictModeAndAgrees(t *testing.T) {
	dir := nodeTools(t)
	sch := compiledSchema(t)
	instances := map[string]any{}
	want := map[string]bool{}
	for _, c := range allSpecs(t) {
		inst, ok := asJSON(t, c.src)
		if !ok {
			continue
		}
		instances[c.name] = inst
		want[c.name] = sch.Validate(inst) == nil
	}
	input, err := json.Marshal(map[string]any{"schema": json.RawMessage(Schema), "instances": instances})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(dir, "ajv-check.mjs"))
	cmd.Stdin = bytes.NewReader(input)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ajv-check: %v\n%s", err, stderr.String())
	}
	var got struct {
		Warnings []string        `json:"warnings"`
		Valid    map[string]bool `json:"valid"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, w := range got.Warnings {
		t.Errorf("ajv strict mode: %s", w)
	}
	if len(got.Valid) != len(want) {
		t.Fatalf("ajv checked %d specs, want %d", len(got.Valid), len(want))
	}
	for name, v := range want {
		if got.Valid[name] != v {
			t.Errorf("%s: ajv says valid=%v, the Go validator %v", name, got.Valid[name], v)
		}
	}
}
