package main

import (
	"io"

	"github.com/lockgen/lockgen"
)

func runSchema(args []string, stdout, stderr io.Writer) int {
	fs, _ := newFlags("schema", stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if _, err := stdout.Write(lockgen.Schema); err != nil {
		return report(stderr, err)
	}
	return exitOK
}
