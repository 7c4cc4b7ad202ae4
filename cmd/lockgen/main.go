// Command lockgen generates type-safe Go helpers for the distributed locks
// declared in a locks.yaml.
//
// Usage:
//
//	lockgen [generate] [-config locks.yaml]   write the generated file (default command)
//	lockgen check [-config locks.yaml]        exit 1 with a diff when the file is stale
//	lockgen init [-config locks.yaml]         write a commented starter spec and its JSON Schema beside it
//	lockgen schema [-o locks.schema.json]     print or write the JSON Schema of locks.yaml
//	lockgen vet [-json] [-test] [packages]    report lock-order inversions and misused hold contexts
//	lockgen inspect -redis URL [Name [p=v …]] show who holds and waits for the locks in Redis
//	lockgen version                           print the version
//	lockgen help [command]                    print this, or a command's flags
//
// Exit codes: 0 ok; 1 stale output or a failed run (init finding the spec
// already there, a spec outside a module, an I/O error); 2 usage or spec
// errors (an unknown command or flag, a stray argument, a -config that
// names no spec file, any problem of the spec). vet also exits 1 on findings,
// inspect when the lock is not held. Use it from go generate:
//
//	//go:generate go tool lockgen
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	if vetTool(os.Args[1:]) {
		runVetTool() // go vet -vettool=$(which lockgen)
	}
	// go-redis prints its pool's dial failures to stderr; the commands
	// report what went wrong in one line of their own.
	redis.SetLogger(quietRedis{})
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// quietRedis is a go-redis logger that prints nothing.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// command is one subcommand, as the usage shows it.
type command struct {
	name    string
	args    string // the synopsis after the name
	summary string
}

// commands in the order the usage lists them.
var commands = []command{
	{"generate", "[-config locks.yaml]", "write the generated Go file (the default command)"},
	{"check", "[-config locks.yaml]", "exit 1 and print a diff when the generated file is stale or missing"},
	{"init", "[-config locks.yaml]", "write a commented starter spec, and its JSON Schema beside it"},
	{"schema", "[-o locks.schema.json]", "print the JSON Schema of locks.yaml, or write it to a file"},
	{"vet", "[-json] [-test] [packages]", "report lock-order inversions and misused hold contexts (exit 1 on findings)"},
	{"inspect", "-redis URL [-json] [-watch 1s] [Name [param=value …]]", "show who holds the declared locks in Redis, and who waits (read-only)"},
	{"version", "", "print lockgen's version"},
	{"help", "[command]", "print this, or the flags of a command"},
}

// runner returns the function that runs the command: it parses its own
// flags from args. help has none (run handles it).
func (c command) runner() func(args []string, stdout, stderr io.Writer) int {
	switch c.name {
	case "generate":
		return runGenerate
	case "check":
		return runCheck
	case "init":
		return runInit
	case "schema":
		return runSchema
	case "vet":
		return runVet
	case "inspect":
		return runInspect
	case "version":
		return runVersion
	}
	return nil
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

func run(args []string, stdout, stderr io.Writer) int {
	name := "generate"
	switch {
	case len(args) > 0 && isHelpFlag(args[0]):
		usage(stdout)
		return exitOK
	case len(args) > 0 && !strings.HasPrefix(args[0], "-"):
		name, args = args[0], args[1:]
	}
	if name == "help" {
		return runHelp(args, stdout, stderr)
	}
	cmd, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "lockgen: unknown command %q (%s)\nrun 'lockgen -h' for usage\n", name, unknownCommandFix(name))
		return exitUsage
	}
	return cmd.runner()(args, stdout, stderr)
}

// unknownCommandFix says what the user probably meant by name.
func unknownCommandFix(name string) string {
	if s := lockgen.Suggest(name, commandNames()); s != "" {
		return fmt.Sprintf("did you mean %q?", s)
	}
	if strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") {
		return "to generate from a spec, write lockgen -config " + name
	}
	return "the commands are " + strings.Join(commandNames(), ", ")
}

func isHelpFlag(a string) bool {
	return a == "-h" || a == "-help" || a == "--help"
}

func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return exitOK
	}
	cmd, ok := lookup(args[0])
	if !ok || cmd.runner() == nil {
		if ok {
			usage(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "lockgen help: unknown command %q (%s)\n", args[0], unknownCommandFix(args[0]))
		return exitUsage
	}
	return cmd.runner()([]string{"-h"}, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "lockgen generates type-safe Go helpers for the distributed locks declared in a locks.yaml.")
	fmt.Fprintln(w, "\nusage:")
	for _, c := range commands {
		synopsis := c.name
		if c.name == "generate" {
			synopsis = "[generate]"
		}
		if c.args != "" {
			synopsis += " " + c.args
		}
		fmt.Fprintf(w, "  lockgen %-32s %s\n", synopsis, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'lockgen help <command>' for a command's flags. Use it from go generate:")
	fmt.Fprintln(w, "\n  //go:generate go tool lockgen")
	fmt.Fprintln(w, "\nexit codes: 0 ok, 1 stale output or a failed run, 2 usage or spec errors")
	fmt.Fprintln(w, "docs: https://github.com/lockgen/lockgen#readme")
}
