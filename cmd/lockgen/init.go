package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

//go:embed starter.yaml
var starter []byte

func runInit(args []string, stdout, stderr io.Writer) int {
	fset, config := newFlags("init", stderr)
	if code, ok := parseFlags(fset, args); !ok {
		return code
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
	fmt.Fprintf(stdout, "lockgen: wrote %s; add //go:generate go tool lockgen next to it and run go generate\n", *config)
	return exitOK
}
