package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen"
	"github.com/lockgen/lockgen/inspect"
)

// listFlag is a flag that may be repeated.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// runInspect reads live lock state from Redis (package inspect does the
// work). Exit codes: 0 shown, 1 not held / no live instance / Redis
// error, 2 usage.
func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("inspect")
	config := configFlag(fs)
	var urls, red listFlag
	fs.Var(&urls, "redis", "Redis URL (redis://, rediss://, ?master_name= for Sentinel); repeat for a cluster's seeds")
	cluster := fs.Bool("cluster", false, "the -redis URL is a Redis Cluster node")
	fs.Var(&red, "red", "URL of a RedLock node, for red locks; repeat for each node")
	asJSON := fs.Bool("json", false, "print JSON for scripts")
	limit := fs.Int("limit", inspect.DefaultLimit, "most instances listed per lock")
	watch := fs.Duration("watch", 0, "redraw every interval (e.g. 1s) until interrupted")
	timeout := fs.Duration("timeout", 10*time.Second, "give up a view (each -watch frame) that Redis has not answered within this")
	name, params, code, ok := parseInspectArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "lockgen inspect: -timeout %v: give a positive duration (e.g. -timeout 30s)\n", *timeout)
		return exitUsage
	}
	if *limit <= 0 {
		fmt.Fprintf(stderr, "lockgen inspect: -limit %d: give how many instances to list per lock, at least 1 (default %d)\n", *limit, inspect.DefaultLimit)
		return exitUsage
	}
	if !specExists(*config, stderr) {
		return exitUsage
	}
	src, err := os.ReadFile(*config)
	if err != nil {
		return report(stderr, err) // as generate: exit 1
	}
	spec, err := lockgen.Parse(*config, src)
	if err != nil {
		return report(stderr, err)
	}
	rdb, err := inspect.Connect(urls, *cluster)
	if err != nil {
		fmt.Fprintln(stderr, "lockgen inspect:", err)
		return exitUsage
	}
	defer rdb.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	view := func() (context.Context, context.CancelFunc) {
		return context.WithTimeoutCause(ctx, *timeout, fmt.Errorf("Redis did not answer within -timeout %v (raise it for a slow link or a large keyspace)", *timeout))
	}
	// The deployment probe runs within the first view's deadline: one
	// -timeout bounds both, not one each.
	first, cancelFirst := view()
	defer cancelFirst()
	if code, ok := checkDeployment(first, rdb, stderr); !ok {
		return code
	}
	nodes, addrs, err := inspect.ConnectNodes(red)
	if err != nil {
		fmt.Fprintln(stderr, "lockgen inspect:", err)
		return exitUsage
	}
	for _, n := range nodes {
		defer n.Close()
	}
	in := &inspect.Inspector{Spec: spec, Redis: rdb, RedNodes: nodes, RedAddrs: addrs, Limit: *limit}
	show := func() int {
		vctx, cancel := first, cancelFirst
		if vctx == nil {
			vctx, cancel = view()
		}
		first = nil
		defer cancel()
		return showInspect(vctx, in, name, params, *asJSON, stdout, stderr)
	}
	if *watch <= 0 {
		return show()
	}
	return watchInspect(ctx, *watch, show, stdout)
}

// checkDeployment refuses a cluster node given as a single server (see
// inspect.NotClusterNode), within ctx: the first view's deadline. A probe
// out of time fails as the view would, naming -timeout.
func checkDeployment(ctx context.Context, rdb redis.UniversalClient, stderr io.Writer) (int, bool) {
	err := inspect.NotClusterNode(ctx, rdb)
	switch {
	case err == nil:
		return 0, true
	case inspect.IsUsage(err):
		fmt.Fprintln(stderr, "lockgen inspect:", err)
		return exitUsage, false
	}
	if cause := context.Cause(ctx); cause != nil && ctx.Err() == context.DeadlineExceeded {
		err = cause
	}
	fmt.Fprintln(stderr, "lockgen inspect:", err)
	return exitFail, false
}

// withClusterHint adds the fix to a MOVED or ASK reply: the -redis URL is
// a Redis Cluster node read as a single server (one that did not say so
// to INFO).
func withClusterHint(err error) error {
	var re redis.Error
	if errors.As(err, &re) && (strings.HasPrefix(re.Error(), "MOVED ") || strings.HasPrefix(re.Error(), "ASK ")) {
		return fmt.Errorf("%w (the -redis URL is a Redis Cluster node: add -cluster)", err)
	}
	return err
}

// parseInspectArgs parses the flags, then [Name [param=value …]]; flags
// may also follow the name.
func parseInspectArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (name string, params map[string]string, code int, ok bool) {
	var rest []string
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			commandUsage(fs, stdout)
			return "", nil, exitOK, false
		case err != nil:
			fmt.Fprintf(stderr, "%s: %s\nrun '%s -h' for its flags\n", fs.Name(), flagError(fs, err), fs.Name())
			return "", nil, exitUsage, false
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	params = map[string]string{}
	for i, a := range rest {
		if i == 0 {
			name = a
			continue
		}
		k, v, found := strings.Cut(a, "=")
		if !found || k == "" {
			fmt.Fprintf(stderr, "lockgen inspect: %q is not param=value (write e.g. orderID=42)\n", a)
			return "", nil, exitUsage, false
		}
		params[k] = v
	}
	return name, params, 0, true
}

// showInspect prints one view: the summary (no name), a lock's live
// instances (a name without params, for a lock that has some) or one
// instance, and returns its exit code.
func showInspect(ctx context.Context, in *inspect.Inspector, name string, params map[string]string, asJSON bool, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() == context.DeadlineExceeded {
			err = cause // the view's deadline (-timeout), named as such
		}
		err = withClusterHint(err)
		fmt.Fprintln(stderr, "lockgen inspect:", err)
		if inspect.IsUsage(err) {
			return exitUsage
		}
		return exitFail
	}
	// print writes v, as JSON or a table; an error writing it (a closed
	// pipe, a value JSON cannot carry) is a failure, never an empty
	// "success".
	print := func(v any, table func() error) error {
		if asJSON {
			return inspect.WriteJSON(stdout, v)
		}
		return table()
	}
	if name == "" {
		list, err := in.Summary(ctx)
		if err != nil {
			return fail(err)
		}
		if err := print(list, func() error { return inspect.WriteSummary(stdout, list, in.Limit) }); err != nil {
			return fail(err)
		}
		for _, s := range list {
			if s.Error != "" {
				return exitFail // shown, but not every lock could be read
			}
		}
		return exitOK
	}
	if len(params) == 0 && in.HasParams(name) {
		list, truncated, err := in.Instances(ctx, name)
		if err != nil {
			return fail(err)
		}
		if err := print(list, func() error { return inspect.WriteInstances(stdout, list, truncated, in.Limit) }); err != nil {
			return fail(err)
		}
		if len(list) == 0 {
			if !asJSON {
				fmt.Fprintf(stderr, "lockgen inspect: no live instance of %s\n", name)
			}
			return exitFail
		}
		return exitOK
	}
	st, err := in.Instance(ctx, name, params)
	if err != nil {
		return fail(err)
	}
	if err := print(st, func() error { return inspect.WriteInstance(stdout, st) }); err != nil {
		return fail(err)
	}
	if !st.Held {
		return exitFail
	}
	return exitOK
}

// watchInspect redraws the view every interval until ctx is done (^C),
// returning the last view's exit code.
func watchInspect(ctx context.Context, every time.Duration, show func() int, stdout io.Writer) int {
	clear := "\n"
	if f, ok := stdout.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			clear = "\x1b[H\x1b[2J" // a terminal: redraw in place
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	code := exitOK
	for first := true; ; first = false {
		if !first {
			fmt.Fprint(stdout, clear)
		}
		fmt.Fprintf(stdout, "every %v, at %s (^C to stop)\n", every, time.Now().Format(time.TimeOnly))
		code = show()
		select {
		case <-ctx.Done():
			return code
		case <-t.C:
		}
	}
}
