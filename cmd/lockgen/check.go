package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/lockgen/lockgen"
)

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs, config := newFlags("check", stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
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
	if diff != "" {
		fmt.Fprint(stdout, diff)
		fmt.Fprintf(stderr, "lockgen: %s is stale or missing (run go generate, or lockgen -config %s)\n", name, *config)
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
