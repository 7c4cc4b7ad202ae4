package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lockgen/lockgen"
)

// newFlags returns the flag set of a subcommand with its usage text.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("lockgen "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parseFlags prints what went wrong itself
	return fs
}

// configFlag adds -config, the path of the spec.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "locks.yaml", "path of the spec")
}

// parseFlags parses args, returning an exit code when it should stop:
// after -h (the command's usage on stdout), or a usage error (on stderr,
// with a did-you-mean for a mistyped flag).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (int, bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		commandUsage(fs, stdout)
		return exitOK, false
	case err != nil:
		fmt.Fprintf(stderr, "%s: %s\nrun '%s -h' for its flags\n", fs.Name(), flagError(fs, err), fs.Name())
		return exitUsage, false
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q (%s)\nrun '%s -h' for its flags\n", fs.Name(), fs.Arg(0), argFix(fs), fs.Name())
		return exitUsage, false
	}
	return 0, true
}

// flagError rewords the flag package's errors, adding a suggestion for an
// unknown flag.
func flagError(fs *flag.FlagSet, err error) string {
	const undefined = "flag provided but not defined: -"
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, undefined)
	if !ok {
		return msg
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	switch s := lockgen.Suggest(strings.TrimLeft(name, "-"), names); {
	case s != "":
		return fmt.Sprintf("unknown flag -%s (did you mean -%s?)", name, s)
	case len(names) == 0:
		return fmt.Sprintf("unknown flag -%s (this command takes no flags)", name)
	default:
		return fmt.Sprintf("unknown flag -%s (its flags are -%s)", name, strings.Join(names, ", -"))
	}
}

// argFix says how to pass what was given as an argument.
func argFix(fs *flag.FlagSet) string {
	arg := fs.Arg(0)
	for _, f := range []string{"config", "o"} {
		if fs.Lookup(f) != nil {
			return "pass it with -" + f + " " + arg
		}
	}
	return "this command takes no arguments"
}

// commandUsage prints a command's synopsis, summary and flags.
func commandUsage(fs *flag.FlagSet, w io.Writer) {
	name := strings.TrimPrefix(fs.Name(), "lockgen ")
	cmd, _ := lookup(name)
	fmt.Fprintf(w, "usage: lockgen %s %s\n\n%s\n", name, cmd.args, cmd.summary)
	any := false
	fs.VisitAll(func(*flag.Flag) { any = true })
	if any {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
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

// specExists reports a -config path that names no spec file (it does not
// exist, or is a directory), suggesting a similarly named spec beside it,
// or lockgen init. The caller exits 2: the command line names no spec (a
// usage error, which check must not report as stale output).
func specExists(config string, stderr io.Writer) bool {
	info, err := os.Stat(config)
	if err == nil && info.IsDir() {
		fmt.Fprintf(stderr, "lockgen: %s is a directory (%s)\n", config, specInDir(config))
		return false
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return true // other errors are reported when the spec is read
	}
	fix := "write a starter spec with lockgen init -config " + config
	if config == "locks.yaml" {
		fix = "write a starter spec with lockgen init, or pass -config path/to/locks.yaml"
	}
	dir := filepath.Dir(config)
	entries, _ := os.ReadDir(dir)
	var specs []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			specs = append(specs, n)
		}
	}
	sort.Strings(specs)
	if s := lockgen.Suggest(filepath.Base(config), specs); s != "" {
		fix = "did you mean -config " + filepath.Join(dir, s) + "?"
	}
	fmt.Fprintf(stderr, "lockgen: %s does not exist (%s)\n", config, fix)
	return false
}

// specInDir is the fix for a -config that names directory dir: the spec
// in it, when there is one.
func specInDir(dir string) string {
	spec := filepath.Join(dir, "locks.yaml")
	if info, err := os.Stat(spec); err == nil && !info.IsDir() {
		return "did you mean -config " + spec + "?"
	}
	return "pass the spec's file, e.g. -config " + spec
}
