package main

import (
	"fmt"
	"io"

	"github.com/lockgen/lockgen"
)

func runGenerate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("generate")
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
	changed, err := out.Write()
	if err != nil {
		return report(stderr, err)
	}
	if changed {
		fmt.Fprintln(stdout, "lockgen: wrote", relPath(out.Path))
	}
	return refreshSchema(*config, stdout, stderr)
}
