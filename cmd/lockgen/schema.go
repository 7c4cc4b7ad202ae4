package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/lockgen/lockgen"
)

func runSchema(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("schema")
	out := fs.String("o", "", "write the schema to this file (only when it changed; never over a file that is not lockgen's schema) instead of printing it")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *out == "" {
		if _, err := stdout.Write(lockgen.Schema); err != nil {
			return report(stderr, err)
		}
		return exitOK
	}
	changed, err := lockgen.WriteSchema(*out)
	if err != nil {
		return report(stderr, err)
	}
	if changed {
		fmt.Fprintln(stdout, "lockgen: wrote", *out)
	}
	return exitOK
}

// refreshSchema keeps the schema file that the spec's modeline names (see
// lockgen init) equal to this lockgen's schema, so that editor checks do
// not drift from the generator. A file there that is not lockgen's is
// left alone.
func refreshSchema(config string, stdout, stderr io.Writer) int {
	src, err := os.ReadFile(config)
	if err != nil {
		return report(stderr, err)
	}
	path := lockgen.LocalSchema(config, src)
	if path == "" {
		return exitOK
	}
	changed, err := lockgen.WriteSchema(path)
	switch {
	case errors.Is(err, lockgen.ErrForeignFile):
		return exitOK
	case err != nil:
		return report(stderr, err)
	case changed:
		fmt.Fprintln(stdout, "lockgen: wrote", relPath(mustAbs(path)))
	}
	return exitOK
}

// schemaStale reports, for check, a schema file named by the spec's
// modeline that generate would write: absent, or another version's.
func schemaStale(config string, stderr io.Writer) bool {
	src, err := os.ReadFile(config)
	if err != nil {
		return false
	}
	path := lockgen.LocalSchema(config, src)
	if path == "" {
		return false
	}
	state, err := lockgen.CheckSchema(path)
	if err != nil || state == lockgen.SchemaCurrent || state == lockgen.SchemaForeign {
		return false
	}
	shown := relPath(mustAbs(path))
	fmt.Fprintf(stderr, "lockgen: %s, the schema the modeline of %s names, is missing or from another lockgen version (run lockgen generate, or lockgen schema -o %s)\n", shown, config, shown)
	return true
}

func mustAbs(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}
