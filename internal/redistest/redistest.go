// Package redistest starts real redis-server processes on loopback ports for
// tests: a single server, N independent servers, with stop, kill, pause and
// restart helpers for fault tests.
//
// Servers run in a temporary directory without persistence and are killed
// when the test ends. When redis-server is not installed, tests fail if the
// CI environment variable is set (CI must never skip them) and are skipped
// with an install hint otherwise.
package redistest

import (
	"bufio"
	"context"
	"fmt"
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
	args []string

	mu   sync.Mutex
	port int
	cmd  *exec.Cmd
	done chan struct{}
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
	s := &Server{tb: tb, bin: Binary(tb), dir: tb.TempDir()}
	for _, o := range opts {
		o(&s.args)
	}
	if err := s.start(0); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(s.Kill)
	return s
}

// StartN starts n independent servers.
func StartN(tb testing.TB, n int, opts ...Option) []*Server {
	tb.Helper()
	servers := make([]*Server, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range servers {
		s := &Server{tb: tb, bin: Binary(tb), dir: tb.TempDir()}
		for _, o := range opts {
			o(&s.args)
		}
		servers[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.start(0)
		}()
	}
	wg.Wait()
	for _, s := range servers {
		tb.Cleanup(s.Kill)
	}
	for _, err := range errs {
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
	}
	return servers
}

// Addr is "127.0.0.1:<port>".
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
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
			if p, err = freePort(); err != nil {
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
	args := []string{
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
	}
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
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
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
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
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
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(d)
	_ = cmd.Process.Signal(syscall.SIGCONT)
}

// Running reports whether the process is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Dir is the server's working directory.
func (s *Server) Dir() string { return s.dir }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
