// Package redistest starts real redis-server processes on loopback ports for
// tests: a single server, N independent servers, a master with a replica, a
// 3+3 node Redis Cluster and a Sentinel-managed pair, with stop, kill, pause
// and restart helpers for fault tests.
//
// Servers run in a temporary directory without persistence (but for the
// nodes.conf and sentinel.conf files that cluster and sentinel modes need)
// and are killed when the test ends. When redis-server is not installed,
// tests fail if the CI environment variable is set (CI must never skip them)
// and are skipped with an install hint otherwise.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	conf string // config file given before the flags; sentinels need one to rewrite
	args []string
	// bus: the port chosen must leave port+10000 free for the cluster bus.
	bus bool

	mu    sync.Mutex
	port  int
	cmd   *exec.Cmd
	done  chan struct{}
	admin *redis.Client // for the package's own polling; see control
}

// Option adds redis-server command-line arguments, e.g. Arg("--maxmemory", "64mb").
type Option func(*[]string)

// Arg passes extra arguments to redis-server.
func Arg(args ...string) Option {
	return func(a *[]string) { *a = append(*a, args...) }
}

// Binary returns the path of redis-server, failing (under CI) or skipping
// tb when it is not installed.
func Binary(tb testing.TB) string {
	tb.Helper()
	return binary(tb, "redis-server")
}

func binary(tb testing.TB, name string) string {
	tb.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	hint := name + " not found in PATH: install it with `apt-get install redis-server` (Debian/Ubuntu) or `brew install redis`"
	if os.Getenv("CI") != "" {
		tb.Fatal(hint)
	}
	tb.Skip(hint)
	return ""
}

// Start starts one redis-server on a free loopback port and stops it when
// the test ends.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s := newServer(tb, opts...)
	launch(tb, s)
	return s
}

// StartN starts n independent servers.
func StartN(tb testing.TB, n int, opts ...Option) []*Server {
	tb.Helper()
	servers := make([]*Server, n)
	for i := range servers {
		servers[i] = newServer(tb, opts...)
	}
	launch(tb, servers...)
	return servers
}

// newServer prepares a server in its own temporary directory; it is killed
// when the test ends.
func newServer(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: Binary(tb), dir: tb.TempDir()}
	for _, o := range opts {
		o(&s.args)
	}
	tb.Cleanup(s.Kill)
	return s
}

// launch starts servers in parallel on free ports and fails tb if any does
// not come up.
func launch(tb testing.TB, servers ...*Server) {
	tb.Helper()
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.start(0)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
}

// Addr is "127.0.0.1:<port>".
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// String is the server's address, so failure messages can print servers
// and slices of them with %v.
func (s *Server) String() string { return s.Addr() }

func addrsOf(servers []*Server) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Port is the server's TCP port.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// URL is "redis://127.0.0.1:<port>".
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Client returns a go-redis client for the server, closed when the test ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *Server) start(port int) error {
	for attempt := 0; ; attempt++ {
		p := port
		if p == 0 {
			var err error
			if p, err = freePort(s.bus); err != nil {
				return err
			}
		}
		err := s.spawn(p)
		if err == nil {
			return nil
		}
		// A random port can be taken between probing and binding; a fixed
		// one (restart) can linger in TIME_WAIT for a moment.
		if attempt >= 20 {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) spawn(port int) error {
	var args []string
	if s.conf != "" {
		args = append(args, s.conf) // redis-server reads a config file only as its first argument
	}
	args = append(args,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", "",
		"--loglevel", "warning",
		"--databases", "1",
		// A replica's full sync starts at once instead of after 5 s.
		"--repl-diskless-sync-delay", "0",
	)
	args = append(args, s.args...)
	cmd := exec.Command(s.bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	var logMu sync.Mutex
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
		}
		_ = cmd.Wait()
		close(done)
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(addr) == nil {
			break
		}
		select {
		case <-done:
			logMu.Lock()
			defer logMu.Unlock()
			return fmt.Errorf("redis-server on port %d exited: %s", port, strings.TrimSpace(log.String()))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server on port %d did not answer PING within 10s", port)
		}
	}
	s.mu.Lock()
	s.port, s.cmd, s.done = port, cmd, done
	s.mu.Unlock()
	return nil
}

func ping(addr string) error {
	c := controlClient(addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return c.Ping(ctx).Err()
}

// Kill sends SIGKILL and waits for the process to exit (a crash: no goodbye
// to clients).
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

// Stop shuts the server down gracefully (SIGTERM) and waits for it.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done, admin := s.cmd, s.done, s.admin
	s.cmd, s.admin = nil, nil
	s.mu.Unlock()
	if admin != nil {
		_ = admin.Close() // its connections die with the process
	}
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	<-done
}

// Restart starts the server again on the same port after Kill or Stop (or
// kills it first). Data is gone: nothing is persisted.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	if err := s.start(s.Port()); err != nil {
		s.tb.Fatalf("redistest: restart: %v", err)
	}
}

// Pause freezes the process (SIGSTOP) for d, then resumes it (SIGCONT):
// clients see a server that accepts nothing and answers nothing.
func (s *Server) Pause(d time.Duration) {
	resume := s.Freeze()
	time.Sleep(d)
	resume()
}

// Freeze freezes the process (SIGSTOP) until the returned func resumes it
// (SIGCONT), which the test's cleanup does too.
func (s *Server) Freeze() (resume func()) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return func() {}
	}
	_ = cmd.Process.Signal(syscall.SIGSTOP)
	var once sync.Once
	resume = func() { once.Do(func() { _ = cmd.Process.Signal(syscall.SIGCONT) }) }
	s.tb.Cleanup(resume)
	return resume
}

// Running reports whether the process is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Dir is the server's working directory.
func (s *Server) Dir() string { return s.dir }

// control is the client the package itself polls the server with; Kill and
// Stop drop it.
func (s *Server) control() *redis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admin == nil {
		s.admin = controlClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)))
	}
	return s.admin
}

// controlClient makes a client for polling: no retries and short timeouts,
// so a killed or paused server costs one poll, and RESP2 replies. One dial
// attempt: go-redis redials a refused connection 5 times 100 ms apart by
// default, which made every server start wait 100 ms for its first PING.
func controlClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:          addr,
		Protocol:      2,
		MaxRetries:    -1,
		DialerRetries: 1,
		DialTimeout:   500 * time.Millisecond,
		ReadTimeout:   time.Second,
		WriteTimeout:  time.Second,
		PoolSize:      2,
	})
}

// clusterBusOffset is how far above its client port a cluster node listens
// for the cluster bus.
const clusterBusOffset = 10000

// handedOut are the ports freePort handed out in this process.
var handedOut = struct {
	sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

// freePort picks a port at random, never one this process handed out
// before, that is free on loopback now: in 10000–19999 for a server, in
// 20000–29999 for a cluster node (with bus, its bus port +10000 is free
// too). Not from the kernel's ephemeral range: the kernel hands a port
// that was just freed to the next process that asks, and a killed
// server's port reused by another test's server (another test binary
// running at the same time) is found by whoever still looks for the dead
// one there. A cluster node's peers gossip to it, and the two clusters
// merge; a replica whose master was killed reconnects, syncs from the
// stranger and shows up as its replica, and sentinels count it as one
// for good (a CI run failed so: "num-slaves is 2, want 1").
func freePort(bus bool) (int, error) {
	base := 10000
	if bus {
		base = 20000
	}
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 1000 {
		port := base + rand.IntN(10000)
		if handedOut.used[port] {
			continue
		}
		ports := []int{port}
		if bus {
			ports = append(ports, port+clusterBusOffset)
		}
		ok := true
		for _, p := range ports {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				ok = false
				break
			}
			_ = l.Close()
		}
		if ok {
			handedOut.used[port] = true
			return port, nil
		}
	}
	return 0, errors.New("redistest: no free loopback port")
}
