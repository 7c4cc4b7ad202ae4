// Command lockgen generates type-safe Go helpers for the distributed locks
// declared in a locks.yaml.
//
// Usage:
//
//	lockgen [generate] [-config locks.yaml]   write the generated file (default command)
//	lockgen check [-config locks.yaml]        exit 1 with a diff when the file is stale
//	lockgen init [-config locks.yaml]         write a commented starter spec
//	lockgen schema                            print the JSON Schema of locks.yaml
//	lockgen version                           print the version
//
// Exit codes: 0 ok, 1 stale output or failed generation, 2 usage or spec
// errors. Use it from go generate:
//
//	//go:generate go tool lockgen
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand: it parses its own flags from args.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{
	"generate": {"write the generated Go file (the default)", runGenerate},
	"check":    {"exit 1 and print a diff when the generated file is stale or missing", runCheck},
	"init":     {"write a commented starter locks.yaml", runInit},
	"schema":   {"print the JSON Schema of locks.yaml", runSchema},
	"version":  {"print the lockgen version", runVersion},
}

var order = []string{"generate", "check", "init", "schema", "version"}

func run(args []string, stdout, stderr io.Writer) int {
	name := "generate"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		usage(stdout)
		return exitOK
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "lockgen: unknown command %q\n", name)
		usage(stderr)
		return exitUsage
	}
	return cmd.run(args, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: lockgen [command] [-config locks.yaml]")
	fmt.Fprintln(w, "\ncommands:")
	for _, n := range order {
		fmt.Fprintf(w, "  %-9s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nexit codes: 0 ok, 1 stale or failed generation, 2 usage or spec errors")
}
