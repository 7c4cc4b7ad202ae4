package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/lockgen/lockgen"
)

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check")
	config := configFlag(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if !specExists(*config, stderr) {
		return exitUsage
	}
	out, err := lockgen.Generate(*config)
	if err != nil {
		return report(stderr, err)
	}
	name := relPath(out.Path)
	diff, err := out.Diff(filepath.ToSlash(name))
	if err != nil {
		return report(stderr, err)
	}
	stale := schemaStale(*config, stderr)
	if diff != "" {
		fmt.Fprint(stdout, diff)
		fmt.Fprintf(stderr, "lockgen: %s is stale or missing (run go generate, or lockgen -config %s)\n", name, *config)
		return exitFail
	}
	if stale {
		return exitFail
	}
	return exitOK
}

// relPath shows p relative to the working directory when it is inside it.
func relPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if r, err := filepath.Rel(wd, p); err == nil && filepath.IsLocal(r) {
		return r
	}
	return p
}
