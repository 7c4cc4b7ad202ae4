package main

import (
	"fmt"
	"io"

	"github.com/lockgen/lockgen"
)

func runGenerate(args []string, stdout, stderr io.Writer) int {
	fs, config := newFlags("generate", stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	out, err := lockgen.Generate(*config)
	if err != nil {
		return report(stderr, err)
	}
	changed, err := out.Write()
	if err != nil {
		return report(stderr, err)
	}
	if changed {
		fmt.Fprintln(stdout, "lockgen: wrote", relPath(out.Path))
	}
	return exitOK
}
