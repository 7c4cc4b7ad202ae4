package lockgen_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lockgen/lockgen"
	"github.com/lockgen/lockgen/internal/redistest"
)

const e2eSpec = `version: 1
package: locks
locks:
  AccountLock:
    doc: Serialises balance updates of one account.
    key: "account:${id}"
    params:
      id: example.com/e2e/domain.AccountID
    waitTime: 30s
`

const e2eDomain = `package domain

// AccountID is a user-defined key type.
type AccountID string
`

// e2eMain updates a balance with a non-atomic read-modify-write inside the
// generated helper, and checks a counter of holders inside the lock.
const e2eMain = `package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/e2e/domain"
	"example.com/e2e/locks"
	"github.com/lockgen/lockgen/runtime"
)

func main() {
	n, _ := strconv.Atoi(os.Args[2])
	rdb := redis.NewClient(&redis.Options{Addr: os.Args[1]})
	c, err := runtime.NewClient(rdb, nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	l := locks.New(c)
	ctx := context.Background()
	violations := 0
	for i := 0; i < n; i++ {
		err := l.WithAccountLock(ctx, domain.AccountID("acct-{7}"), func(ctx context.Context) error {
			if rdb.Incr(ctx, "inside").Val() != 1 {
				violations++
			}
			defer rdb.Decr(ctx, "inside")
			b, _ := rdb.Get(ctx, "balance").Int()
			time.Sleep(time.Millisecond)
			return rdb.Set(ctx, "balance", b+1, 0).Err()
		})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	}
	fmt.Println("violations", violations)
}
`

// TestGeneratedHelperExcludesProcessesOnRealRedis generates helpers for a
// user-defined key type in a fresh module, builds a program with them, and
// runs three copies against one redis-server: the lock must make their
// read-modify-write updates of one balance exclusive.
func TestGeneratedHelperExcludesProcessesOnRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeModule(t, dir, root)
	mod := strings.Replace(mustRead(t, filepath.Join(dir, "go.mod")), "module example.com/goldens", "module example.com/e2e", 1)
	writeFiles(t, dir, map[string]string{
		"go.mod":           mod,
		"domain/domain.go": e2eDomain,
		"locks/locks.yaml": e2eSpec,
		"main.go":          e2eMain,
	})
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOWORK", "off")
	out, err := lockgen.Generate(filepath.Join(dir, "locks", "locks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Content), `"example.com/e2e/domain"`) {
		t.Fatalf("generated file does not import the user's package:\n%s", out.Content)
	}
	bin := filepath.Join(dir, "e2e")
	goCmd(t, dir, "build", "-o", bin, ".")

	const procs, each = 3, 25
	var wg sync.WaitGroup
	outputs := make([]string, procs)
	errs := make([]error, procs)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Only stdout is compared: the runtime may log to stderr.
			var stderr strings.Builder
			cmd := exec.Command(bin, srv.Addr(), strconv.Itoa(each))
			cmd.Stderr = &stderr
			b, err := cmd.Output()
			outputs[i], errs[i] = string(b), err
			if err != nil || strings.TrimSpace(string(b)) != "violations 0" {
				outputs[i] += "\nstderr:\n" + stderr.String()
			}
		}()
	}
	wg.Wait()
	for i := range procs {
		if errs[i] != nil || strings.TrimSpace(outputs[i]) != "violations 0" {
			t.Errorf("process %d: %v: %s", i, errs[i], outputs[i])
		}
	}
	rdb := srv.Client(t)
	got, err := rdb.Get(context.Background(), "balance").Int()
	if err != nil || got != procs*each {
		t.Fatalf("balance = %d (%v), want %d: updates were not exclusive", got, err, procs*each)
	}
	keys, _ := rdb.Keys(context.Background(), "account:*").Result()
	if len(keys) != 0 {
		t.Errorf("locks left behind: %v", keys)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
