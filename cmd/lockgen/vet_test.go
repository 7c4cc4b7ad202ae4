package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lockgen/lockgen/internal/redistest"
)

const vetSpec = `version: 1
package: locks
locks:
  OrderLock:
    key: "order:${id}"
    params: {id: int64}
    waitTime: 1s
  InventoryLock:
    kind: fair
    key: "inventory:${sku}"
    params: {sku: string}
    waitTime: 1s
`

// Two services that share the locks but no code: x takes the order, then
// the stock; y the stock, then the order. meet(ctx, step) waits, through
// Redis, until the other side reached the same step: "holds" its first
// lock, so the run shows the deadlock every time instead of once in a
// while under load; "done" waiting for its second, so neither releases
// its first lock before the other gave up, as a slower critical section
// would not.
const vetSvcX = `package svcx

import (
	"context"
	"errors"

	"example.com/app/locks"
)

func Reserve(ctx context.Context, l *locks.Locks, meet func(context.Context, string) error) error {
	return l.WithOrderLock(ctx, 7, func(ctx context.Context) error {
		if err := meet(ctx, "holds"); err != nil {
			return err
		}
		err := l.WithInventoryLock(ctx, "sku-1", func(ctx context.Context) error { return nil })
		return errors.Join(err, meet(ctx, "done"))
	})
}
`

const vetSvcY = `package svcy

import (
	"context"
	"errors"

	"example.com/app/locks"
)

func Restock(ctx context.Context, l *locks.Locks, meet func(context.Context, string) error) error {
	return l.WithInventoryLock(ctx, "sku-1", func(ctx context.Context) error {
		if err := meet(ctx, "holds"); err != nil {
			return err
		}
		err := l.WithOrderLock(ctx, 7, func(ctx context.Context) error { return nil })
		return errors.Join(err, meet(ctx, "done"))
	})
}
`

// vetMain runs one side (x or y) against the Redis at os.Args[1]: it
// prints whether its second lock was not acquired, and whether it waited
// at least that lock's wait time for it.
const vetMain = `package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/app/locks"
	"example.com/app/svcx"
	"example.com/app/svcy"
	"github.com/lockgen/lockgen/runtime"
)

func main() {
	addr, side := os.Args[1], os.Args[2]
	other := map[string]string{"x": "y", "y": "x"}[side]
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := runtime.NewClient(rdb, nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	l := locks.New(c)
	var start time.Time
	var waited time.Duration
	meet := func(ctx context.Context, step string) error {
		if step == "done" {
			waited = time.Since(start)
		}
		rdb.Set(ctx, step+":"+side, 1, time.Minute)
		giveUp := time.Now().Add(time.Minute) // the other process died: do not hold forever
		for rdb.Exists(ctx, step+":"+other).Val() == 0 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Now().After(giveUp) {
				return errors.New("the other side never reached " + step)
			}
			time.Sleep(5 * time.Millisecond)
		}
		start = time.Now()
		return nil
	}
	var run func() error
	if side == "x" {
		run = func() error { return svcx.Reserve(context.Background(), l, meet) }
	} else {
		run = func() error { return svcy.Restock(context.Background(), l, meet) }
	}
	err = run()
	fmt.Printf("%s: not acquired %v, waited at least 1s %v\n", side, errors.Is(err, runtime.ErrNotAcquired), waited >= time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
`

// vetModule writes the module of two services that invert the order of
// OrderLock and InventoryLock, generates its locks, and moves into it.
func vetModule(t *testing.T) string {
	t.Helper()
	dir := tempModule(t)
	for name, src := range map[string]string{
		"locks/locks.yaml": vetSpec,
		"svcx/x.go":        vetSvcX,
		"svcy/y.go":        vetSvcY,
		"main.go":          vetMain,
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errOut := runCLI(t, "-config", filepath.Join(dir, "locks", "locks.yaml")); code != exitOK {
		t.Fatalf("generate exited %d: %s%s", code, out, errOut)
	}
	t.Chdir(dir)
	return dir
}

// The report of lockgen vet ./... on vetModule, exactly: each service's
// edge, naming the other's, and the import in main that links them.
const vetReport = `main.go:14:2: lock-order inversion in imported packages that this package links: locks.OrderLock is taken while locks.InventoryLock is held, and elsewhere the other way round (take both in one multi lock, or in one order everywhere)
svcy/y.go:11:9: 	locks.InventoryLock is taken here
svcy/y.go:15:10: 	locks.OrderLock is taken while locks.InventoryLock is held
svcx/x.go:15:10: 	locks.InventoryLock is taken while locks.OrderLock is held: two callers can each hold one and wait for the other until their wait times run out
svcx/x.go:15:10: lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held, and elsewhere the other way round (take both in one multi lock, or in one order everywhere)
svcx/x.go:11:9: 	locks.OrderLock is taken here
svcy/y.go:15:10: 	locks.OrderLock is taken while locks.InventoryLock is held: two callers can each hold one and wait for the other until their wait times run out
svcy/y.go:15:10: lock-order inversion: locks.OrderLock is taken while locks.InventoryLock is held, and elsewhere the other way round (take both in one multi lock, or in one order everywhere)
svcy/y.go:11:9: 	locks.InventoryLock is taken here
svcx/x.go:15:10: 	locks.InventoryLock is taken while locks.OrderLock is held: two callers can each hold one and wait for the other until their wait times run out
`

// TestVetReportsAnInversionThatDeadlocksOnRealRedis runs lockgen vet on
// two services that take two locks in opposite orders, checks the exact
// report and exit code, and then runs both services against a real
// redis-server: each holds one lock and waits out its wait time for the
// other. The report is not theoretical.
func TestVetReportsAnInversionThatDeadlocksOnRealRedis(t *testing.T) {
	vetModule(t)
	code, out, errOut := runCLI(t, "vet", "./...")
	if code != exitFail || out != "" || errOut != vetReport {
		t.Fatalf("lockgen vet ./... exited %d (want 1)\nstdout:\n%s\nstderr:\n%s\nwant stderr:\n%s", code, out, errOut, vetReport)
	}

	srv := redistest.Start(t)
	build := exec.Command("go", "build", "-o", "app", ".")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i, side := range []string{"x", "y"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stderr bytes.Buffer
			cmd := exec.Command("./app", srv.Addr(), side)
			cmd.Stderr = &stderr
			b, err := cmd.Output()
			outs[i] = string(b)
			if err != nil {
				outs[i] += err.Error() + "\n" + stderr.String()
			}
		}()
	}
	wg.Wait()
	want := []string{"x: not acquired true, waited at least 1s true\n", "y: not acquired true, waited at least 1s true\n"}
	for i := range outs {
		if outs[i] != want[i] {
			t.Errorf("side %d said %q, want %q: both sides must wait out their wait time and fail", i, outs[i], want[i])
		}
	}
}

// TestVetOfOnePackageSeesTheLocksItsImportsTake vets only main, as a
// package (.) and as a file (main.go, as go vet main.go does: the file is
// a package of its own): the two services it imports are dependencies,
// which lockgen vet type-checks from source because they import the
// runtime (the rest come from export data), so main's analysis still gets
// their lock orders and reports the cycle they close in it.
func TestVetOfOnePackageSeesTheLocksItsImportsTake(t *testing.T) {
	vetModule(t)
	want := strings.Join(strings.SplitAfter(vetReport, "\n")[:4], "")
	for _, arg := range []string{".", "main.go"} {
		code, out, errOut := runCLI(t, "vet", arg)
		if code != exitFail || out != "" || errOut != want {
			t.Fatalf("lockgen vet %s exited %d (want 1)\nstdout:\n%s\nstderr:\n%s\nwant stderr:\n%s", arg, code, out, errOut, want)
		}
	}
}

func TestVetJSONIsGoAnalysisFormat(t *testing.T) {
	vetModule(t)
	code, out, errOut := runCLI(t, "vet", "-json", "./...")
	if code != exitOK || errOut != "" {
		t.Fatalf("lockgen vet -json exited %d: %s", code, errOut)
	}
	var tree map[string]map[string][]struct {
		Posn, Message, Category string
	}
	if err := json.Unmarshal([]byte(out), &tree); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	got := tree["example.com/app/svcy"]["lockgen"]
	if len(got) != 1 || !strings.HasSuffix(got[0].Posn, filepath.Join("svcy", "y.go")+":15:10") || got[0].Category != "lockorder" {
		t.Fatalf("json findings = %+v, want one lockorder finding at svcy/y.go:15:10\n%s", got, out)
	}
}

func TestVetIsCleanOnTheExample(t *testing.T) {
	code, out, errOut := runCLI(t, "vet", "../../example/...")
	if code != exitOK || out != "" || errOut != "" {
		t.Fatalf("lockgen vet on the example exited %d\n%s%s", code, out, errOut)
	}
}

// TestVetRunsAsGoVetTool builds lockgen and hands it to go vet -vettool:
// go vet analyses one package at a time, so it reports the inversion
// where both sides first meet: at main's import of the first side.
func TestVetRunsAsGoVetTool(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "lockgen")
	build := exec.Command("go", "build", "-o", bin, "./cmd/lockgen")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	vetModule(t)
	cmd := exec.Command("go", "vet", "-vettool="+bin, "./...")
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("go vet -vettool exited %v, want exit status 1\n%s", err, b)
	}
	if want := "main.go:14:2: lock-order inversion in imported packages that this package links: locks.OrderLock is taken while locks.InventoryLock is held"; !strings.Contains(string(b), want) {
		t.Fatalf("go vet -vettool said:\n%s\nwant a line with %q", b, want)
	}
}

// TestVetPrintsALoadErrorOnce vets a package that does not type-check:
// its error is printed once, file:line:col relative as the go command
// prints it, not again as go list's "-: # pkg" compile output.
func TestVetPrintsALoadErrorOnce(t *testing.T) {
	dir := vetModule(t)
	src := "package broken\n\nimport (\n\t\"context\"\n\n\t\"example.com/app/locks\"\n)\n\nfunc F(ctx context.Context, l *locks.Locks) error {\n\treturn l.WithOrderLock(ctx, \"x\", func(context.Context) error { return nil })\n}\n"
	if err := os.MkdirAll(filepath.Join(dir, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken", "b.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "vet", "./broken")
	want := filepath.Join("broken", "b.go") + ":10:30: cannot use"
	if code != exitFail || out != "" || strings.Count(errOut, "cannot use") != 1 || !strings.HasPrefix(errOut, want) || strings.Contains(errOut, "-:") {
		t.Fatalf("lockgen vet ./broken exited %d (want 1)\nstdout:\n%s\nstderr:\n%s\nwant the type error once, starting %q", code, out, errOut, want)
	}
}

// TestVetOfAFileAndAPackageSaysWhy vets a file and a package together,
// which go list refuses: its message is printed without a "-:" position.
func TestVetOfAFileAndAPackageSaysWhy(t *testing.T) {
	vetModule(t)
	code, out, errOut := runCLI(t, "vet", "main.go", "./svcx")
	want := "lockgen vet: named files must be .go files: ./svcx\n"
	if code != exitFail || out != "" || errOut != want {
		t.Fatalf("lockgen vet main.go ./svcx exited %d (want 1)\nstdout:\n%s\nstderr:\n%s\nwant stderr:\n%s", code, out, errOut, want)
	}
}

// TestVetPrintsALineDirectiveWithoutColumnAsFileLine vets a package under
// a //line file:N directive, which gives no column: its findings print
// file:line, as the go command prints them, not file:line:0.
func TestVetPrintsALineDirectiveWithoutColumnAsFileLine(t *testing.T) {
	dir := vetModule(t)
	src := "package tmpl\n\nimport (\n\t\"context\"\n\n\t\"example.com/app/locks\"\n)\n\n" +
		"//line gen.tmpl:100\nfunc A(ctx context.Context, l *locks.Locks) error {\n\treturn l.WithOrderLock(ctx, 1, func(ctx context.Context) error {\n\t\treturn l.WithInventoryLock(ctx, \"s\", func(context.Context) error { return nil })\n\t})\n}\n\n" +
		"//line gen.tmpl:200\nfunc B(ctx context.Context, l *locks.Locks) error {\n\treturn l.WithInventoryLock(ctx, \"s\", func(ctx context.Context) error {\n\t\treturn l.WithOrderLock(ctx, 1, func(context.Context) error { return nil })\n\t})\n}\n"
	if err := os.MkdirAll(filepath.Join(dir, "tmpl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tmpl", "t.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "vet", "./tmpl")
	want := "gen.tmpl:102: lock-order inversion"
	if code != exitFail || out != "" || !strings.Contains(errOut, want) || strings.Contains(errOut, ":0:") {
		t.Fatalf("lockgen vet ./tmpl exited %d (want 1)\nstdout:\n%s\nstderr:\n%s\nwant file:line positions, as %q", code, out, errOut, want)
	}
}
