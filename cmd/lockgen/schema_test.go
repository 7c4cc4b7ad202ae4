package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerateRefusesAModelineSchemaItMayNotWrite: generate refreshes the
// schema file the spec's modeline names, so a modeline leading out of the
// module (through .. or a link) or below a file is a spec error at the
// modeline, reported before anything is written. It used to create
// directories and write the schema outside the module, or write the Go
// file and then fail with a bare OS error.
func TestGenerateRefusesAModelineSchemaItMayNotWrite(t *testing.T) {
	body := "version: 1\npackage: app\nlocks:\n  A:\n    key: \"a:${id}\"\n    params: {id: int64}\n"
	for name, c := range map[string]struct {
		ref  string
		link bool // make link/ a symbolic link to a directory outside the module
		want string
	}{
		"dotdot":     {ref: "../outside/deep/locks.schema.json", want: "leads outside the module"},
		"link":       {ref: "link/locks.schema.json", link: true, want: "through a symbolic link"},
		"below file": {ref: "locks.yaml/x.json", want: "is not a directory"},
	} {
		t.Run(name, func(t *testing.T) {
			mod := tempModule(t)
			outside := filepath.Join(t.TempDir(), "outside")
			if c.link {
				if err := os.Mkdir(outside, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(outside, filepath.Join(mod, "link")); err != nil {
					if os.Getenv("CI") != "" {
						t.Fatalf("cannot make symbolic links under CI: %v", err)
					}
					t.Skip("no symbolic links here:", err)
				}
			}
			spec := filepath.Join(mod, "locks.yaml")
			if err := os.WriteFile(spec, []byte("# yaml-language-server: $schema="+c.ref+"\n"+body), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := runCLI(t, "generate", "-config", spec)
			if code != exitUsage || !strings.Contains(stderr, "locks.yaml:1:33: $schema:") || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d and an error at locks.yaml:1:33 saying %q:\n%s", code, exitUsage, c.want, stderr)
			}
			for _, p := range []string{filepath.Join(mod, "locks_gen.go"), filepath.Join(mod, "..", "outside"), filepath.Join(outside, "locks.schema.json")} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("generate wrote %s", p)
				}
			}
		})
	}
}
