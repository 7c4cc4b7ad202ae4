package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lockgen/lockgen"
)

//go:embed starter.yaml
var starter []byte

// runInit writes the starter spec and, beside it, the JSON Schema its
// modeline names (relative, so editors check the spec offline, against the
// schema of the lockgen that wrote it; generate keeps it current).
func runInit(args []string, stdout, stderr io.Writer) int {
	fset := newFlags("init")
	config := configFlag(fset)
	if code, ok := parseFlags(fset, args, stdout, stderr); !ok {
		return code
	}
	if msg := badInitPath(*config); msg != "" {
		fmt.Fprintln(stderr, "lockgen:", msg)
		return exitUsage
	}
	if _, err := os.Lstat(*config); err == nil {
		fmt.Fprintf(stderr, "lockgen: %s already exists (remove it, or pick another -config path)\n", *config)
		return exitFail
	}
	schema := lockgen.LocalSchema(*config, starter)
	if state, err := lockgen.CheckSchema(schema); err != nil {
		return report(stderr, err)
	} else if state == lockgen.SchemaForeign {
		fmt.Fprintf(stderr, "lockgen: %s exists and is not lockgen's schema, which the starter's modeline names (move it away, or init in another directory)\n", schema)
		return exitFail
	}
	// A fresh module lacks the folder the README's first step names
	// (internal/locks): make it and its parents, only now that nothing
	// refuses the run. O_EXCL still refuses a spec that appeared meanwhile.
	if err := os.MkdirAll(filepath.Dir(*config), 0o755); err != nil {
		return report(stderr, err)
	}
	f, err := os.OpenFile(*config, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		fmt.Fprintf(stderr, "lockgen: %s already exists (remove it, or pick another -config path)\n", *config)
		return exitFail
	}
	if err != nil {
		return report(stderr, err)
	}
	if _, err := f.Write(starter); err != nil {
		f.Close()
		return report(stderr, err)
	}
	if err := f.Close(); err != nil {
		return report(stderr, err)
	}
	if _, err := lockgen.WriteSchema(schema); err != nil {
		return report(stderr, err)
	}
	dir := filepath.Dir(*config)
	fmt.Fprintf(stdout, "lockgen: wrote %s and %s (its JSON Schema, for editor completion and checks)\n", *config, filepath.Join(dir, filepath.Base(schema)))
	fmt.Fprintf(stdout, "next: put //go:generate go tool lockgen in a .go file of %s and run go generate\n", dir)
	return exitOK
}

// badInitPath says why config cannot be the path of a new spec, with the
// fix, or "" when it can: it is a directory, or a folder of its path is a
// file. Both are usage errors; an existing spec is refused by the caller.
func badInitPath(config string) string {
	if info, err := os.Stat(config); err == nil && info.IsDir() {
		return fmt.Sprintf("%s is a directory (pass the path of the spec to write, e.g. -config %s)", config, filepath.Join(config, "locks.yaml"))
	}
	for d := filepath.Dir(config); ; {
		info, err := os.Stat(d)
		switch {
		case err == nil && info.IsDir():
			return ""
		case err == nil:
			return fmt.Sprintf("%s is a file, so %s cannot be made below it (pick another -config path)", d, config)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "" // nothing above exists: MkdirAll reports why
		}
		d = parent
	}
}
