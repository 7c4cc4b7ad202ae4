package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	fmt.Fprintln(stdout, "lockgen", version())
	return exitOK
}

// version is the module version lockgen was built at: set by go install,
// go run pkg@version and go tool without any ldflags; "(devel)" when built
// inside its own repository.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := info.Main.Version
	if info.Main.Path != "github.com/lockgen/lockgen" {
		for _, d := range info.Deps {
			if d.Path == "github.com/lockgen/lockgen" {
				v = d.Version
				if d.Replace != nil {
					v += " (replaced by " + d.Replace.Path + ")"
				}
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return v + " " + info.GoVersion
}
