package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The multi-process shape: the workers of one row are spread over a few
// OS processes, each with its own client, as services run. A library
// cannot profit from in-process shortcuts there (a local queue, a releaser
// handing the lock to a goroutine of its own process). The parent re-runs
// its own binary with -child; each child gets its part of the work as one
// JSON line on stdin, answers "ready" once its client is warm, starts on
// the parent's "go" line and writes its workers' outcomes as JSON to
// stdout. The key truth table (holder, waiters, last release) lives in a
// file every process maps, so violations, idle gaps and barging are seen
// across processes, timed with the one clock they share (CLOCK_MONOTONIC).

// monoNow is CLOCK_MONOTONIC in nanoseconds: comparable between processes
// of one machine, unlike the monotonic reading inside time.Time.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // cannot fail on Linux with a valid clock id
	}
	return ts.Nano()
}

// childSpec is a child's part of a multi-process run.
type childSpec struct {
	Addrs          []string
	Cluster        bool
	Lib            string
	LockgenVersion string
	RedisVersion   string
	Shape          shape
	Names          []string
	KeysFile       string
	FirstWorker    int
	Workers        int
	Warm           string
}

// childResult is what a child writes back.
type childResult struct {
	Outs    []workerOut
	Client  cmdStats
	Giveups int64
	CPU     time.Duration // the child's user + sys CPU over its window
	Conns   []connCount   // the child's connections as its window ended (cluster only)
}

// sharedKeys maps path (created with room for n keyStates) into memory
// shared with every process mapping it.
func sharedKeys(path string, n int, create bool) ([]keyState, func(), error) {
	size := n * int(unsafe.Sizeof(keyState{}))
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if create {
		if err := f.Truncate(int64(size)); err != nil {
			return nil, nil, err
		}
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	keys := unsafe.Slice((*keyState)(unsafe.Pointer(&mem[0])), n)
	return keys, func() { _ = syscall.Munmap(mem) }, nil
}

type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// contendProcs is contend with the workers spread over s.Procs processes.
func (b *bench) contendProcs(l *lib, s shape, prefix string) *run {
	exe, err := os.Executable()
	must(err)
	dir, err := os.MkdirTemp("", "lockgen-bench-keys-")
	must(err)
	defer os.RemoveAll(dir)
	path := dir + "/keys"
	_, unmap, err := sharedKeys(path, s.Keys, true)
	must(err)
	defer unmap()
	names := keyNames(prefix, s.Keys)

	var kids []*child
	defer func() {
		for _, c := range kids {
			_ = c.cmd.Process.Kill() // only if still running after an error
			_ = c.cmd.Wait()
		}
	}()
	first := 0
	for p := range s.Procs {
		n := s.Workers / s.Procs
		if p < s.Workers%s.Procs {
			n++
		}
		spec := childSpec{Addrs: b.be.addrs, Cluster: b.be.cluster, Lib: l.Name, LockgenVersion: b.lockgenVersion, RedisVersion: b.redisVersion,
			Shape: s, Names: names, KeysFile: path, FirstWorker: first, Workers: n, Warm: fmt.Sprintf("%s:warm:%d", names[0], p)}
		first += n
		cmd := exec.Command(exe, "-child")
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		must(err)
		stdout, err := cmd.StdoutPipe()
		must(err)
		must(cmd.Start())
		c := &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
		kids = append(kids, c)
		must(json.NewEncoder(stdin).Encode(spec))
	}
	for _, c := range kids {
		line, err := c.out.ReadString('\n')
		if err != nil || line != "ready\n" {
			panic(fmt.Sprintf("bench child did not get ready: %q %v", line, err))
		}
	}
	before := b.measure(nil)
	end := monoNow() + int64(s.Dur)
	for _, c := range kids {
		_, err := fmt.Fprintf(c.stdin, "%d\n", end)
		must(err)
	}
	var outs []workerOut
	client := cmdStats{}
	var giveups int64
	var cpu time.Duration
	var conns []connCount
	for _, c := range kids {
		var res childResult
		must(json.NewDecoder(c.out).Decode(&res))
		outs = append(outs, res.Outs...)
		for k, v := range res.Client {
			client[k] += v
		}
		giveups += res.Giveups
		cpu += res.CPU
		conns = append(conns, res.Conns...)
		_ = c.stdin.Close()
		must(c.cmd.Wait())
	}
	kids = nil
	r := b.collect(l, s, outs, before, client)
	r.Giveups, r.ClientCPU, r.Conns = giveups, cpu, conns
	return r
}

// childMain is a child of contendProcs (the -child flag).
func childMain() error {
	in := bufio.NewReader(os.Stdin)
	var spec childSpec
	line, err := in.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("child: read spec: %w", err)
	}
	if err := json.Unmarshal(line, &spec); err != nil {
		return fmt.Errorf("child: spec: %w", err)
	}
	slog.SetLogLoggerLevel(slog.LevelWarn) // the parent already logged the Client's start-up lines
	libs := libraries(spec.LockgenVersion, spec.RedisVersion)
	i := slices.IndexFunc(libs, func(l *lib) bool { return l.Name == spec.Lib })
	if i < 0 {
		return fmt.Errorf("child: no row %q", spec.Lib)
	}
	be := newBackend(spec.Addrs, spec.Cluster)
	defer be.close()
	be.warm()
	rdb, cnt := be.client()
	defer rdb.Close()
	var giveups atomic.Int64
	lk, closeLib := libs[i].open(rdb, cnt, &giveups)
	defer closeLib()
	warm(lk, spec.Warm)
	giveups.Store(0)
	keys, unmap, err := sharedKeys(spec.KeysFile, len(spec.Names), false)
	if err != nil {
		return fmt.Errorf("child: %w", err)
	}
	defer unmap()
	before := cnt.snapshot()
	if _, err := fmt.Fprintln(os.Stdout, "ready"); err != nil {
		return err
	}
	var end int64
	if _, err := fmt.Fscanln(in, &end); err != nil {
		return fmt.Errorf("child: read start: %w", err)
	}
	cpu0 := processCPU()
	var conns []connCount
	outs := work(lk, spec.Shape, spec.Names, keys, spec.FirstWorker, spec.Workers, end, be.sampler(&conns))
	cpu := processCPU() - cpu0
	return json.NewEncoder(os.Stdout).Encode(childResult{Outs: outs, Client: cnt.snapshot().sub(before), Giveups: giveups.Load(), CPU: cpu, Conns: conns})
}
