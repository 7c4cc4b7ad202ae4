package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/lockgen/lockgen"
)

// newFlags returns the flag set of a subcommand with the -config flag.
func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("lockgen "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "locks.yaml", "path of the spec")
	return fs, config
}

// parseFlags parses args, returning an exit code when it should stop.
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, false
	}
	return 0, true
}

// report prints a generation error and returns its exit code: 2 for spec
// errors (one line each, with position and fix), 1 for anything else.
func report(stderr io.Writer, err error) int {
	var list lockgen.ErrorList
	if errors.As(err, &list) {
		fmt.Fprintln(stderr, list.Error())
		return exitUsage
	}
	fmt.Fprintln(stderr, "lockgen:", err)
	return exitFail
}
