// Package locktest gives the tests of code that uses lockgen's generated
// locks a ready *runtime.Client, without installing anything:
//
//	func TestShip(t *testing.T) {
//		shop := locks.New(locktest.Client(t, nil))
//		if err := Ship(context.Background(), shop, 42); err != nil {
//			t.Fatal(err)
//		}
//	}
//
// By default the Client runs on a fresh in-process Redis (miniredis) of its
// own, on which every kind of lock works: its key TTLs follow the wall
// clock, so leases expire as on Redis. When the environment variable
// LOCKGEN_TEST_REDIS holds a Redis URL (redis://host:6379/0, rediss://…,
// unix://…, as redis.ParseURL reads it), the Client runs on that server
// instead, and a test fails at once if it cannot be reached:
//
//	LOCKGEN_TEST_REDIS=redis://localhost:6379/0 go test ./...
//
// A real server is shared: by every test of the run, by the test binaries
// of other packages that go test runs at the same time, and by whatever
// else uses it. locktest never flushes it. Tests that run on one should
// lock their own IDs (the test's name in a string key, a number per test)
// rather than the same order 42 everywhere, and a run that was killed
// leaves its holds until their leases end (30 s with the watchdog).
//
// A RedLock spans independent masters, which one server cannot be: unless
// the Options name RedLockNodes, the Client gets three in-process ones,
// shared by every Client of its Server, whichever Redis the rest runs on.
//
// The Client and the Redis clients under it are closed when the test
// ends (through t.Cleanup). Its warnings (lost locks, failed renewals and
// releases) go to the test's log, unless the Options name a Logger.
//
// Several Clients of one NewServer play several processes locking the
// same things; Server.Redis reads and writes its keys directly.
// docs/testing.md shows a table test that checks that code holding
// generated locks never overlaps.
package locktest

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

// EnvVar is the environment variable that points Client and NewServer at
// a real Redis, by URL. Unset or empty, they use an in-process one.
const EnvVar = "LOCKGEN_TEST_REDIS"

// redLockNodes is how many in-process RedLock nodes a Server starts.
const redLockNodes = 3

// TB is the part of a test that locktest uses: *testing.T, *testing.B and
// *testing.F have it (as testing.TB does). Call locktest's functions from
// the test's goroutine, as Fatalf requires.
type TB interface {
	Cleanup(func())
	Fatalf(format string, args ...any)
	Helper()
	Logf(format string, args ...any)
}

// Client returns a *runtime.Client on a fresh Server: an in-process Redis
// of its own, or the real one named by LOCKGEN_TEST_REDIS. opts may be
// nil. It is closed when the test ends.
func Client(t TB, opts *runtime.Options) *runtime.Client {
	t.Helper()
	return NewServer(t).Client(opts)
}

// Server is the Redis that a test's Clients lock through, and the
// RedLock nodes they share.
type Server struct {
	t     TB
	opts  redis.Options // how each Client connects to it
	where string        // for messages; never holds a password
	redis *redis.Client // for the test's own reads and writes
	nodes []string      // addresses of the in-process RedLock nodes
	log   *testLog
}

// NewServer starts an in-process Redis (miniredis), or connects to the one
// named by LOCKGEN_TEST_REDIS and fails the test if it does not answer,
// and starts the in-process RedLock nodes. All of it is closed when the
// test ends.
func NewServer(t TB) *Server {
	t.Helper()
	s := &Server{t: t, log: &testLog{t: t}}
	t.Cleanup(s.log.stop) // last: the Clients that log are closed by then
	if url := os.Getenv(EnvVar); url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			t.Fatalf("locktest: $%s: %v", EnvVar, err)
		}
		s.opts, s.where = *opts, opts.Addr+" (from $"+EnvVar+")"
	} else {
		mr := startMiniredis(t)
		s.opts, s.where = redis.Options{Addr: mr.Addr()}, "in-process Redis "+mr.Addr()
	}
	s.redis = redis.NewClient(s.newOptions())
	t.Cleanup(func() { _ = s.redis.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.redis.Ping(ctx).Err(); err != nil {
		t.Fatalf("locktest: Redis at %s does not answer: %v (unset %s to use an in-process Redis)", s.where, err, EnvVar)
	}
	for range redLockNodes {
		s.nodes = append(s.nodes, startMiniredis(t).Addr())
	}
	return s
}

// startMiniredis starts an in-process Redis whose key TTLs follow the wall
// clock (miniredis' own clock only moves when told), closed at test end.
func startMiniredis(t TB) *miniredis.Miniredis {
	t.Helper()
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true)
	if err := mr.Start(); err != nil {
		t.Fatalf("locktest: starting an in-process Redis: %v", err)
	}
	t.Cleanup(mr.Close)
	return mr
}

// Client returns a new *runtime.Client on the server, with Redis clients
// of its own, as another process would have; opts may be nil. Unless opts
// name them, its RedLockNodes are the Server's in-process nodes, and its
// Logger writes warnings to the test's log. It is closed when the test
// ends.
func (s *Server) Client(opts *runtime.Options) *runtime.Client {
	s.t.Helper()
	var o runtime.Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(s.log, &slog.HandlerOptions{Level: slog.LevelWarn, ReplaceAttr: dropTime}))
	}
	rdb := redis.NewClient(s.newOptions())
	s.t.Cleanup(func() { _ = rdb.Close() })
	if o.RedLockNodes == nil {
		for _, addr := range s.nodes {
			node := redis.NewClient(&redis.Options{Addr: addr})
			s.t.Cleanup(func() { _ = node.Close() })
			o.RedLockNodes = append(o.RedLockNodes, node)
		}
	}
	c, err := runtime.NewClient(rdb, &o)
	if err != nil {
		s.t.Fatalf("locktest: runtime.NewClient on %s: %v", s.where, err)
	}
	s.t.Cleanup(func() { _ = c.Close() }) // before the Redis clients: cleanups run last first
	return c
}

// Redis returns a Redis client on the server, for the test's own reads and
// writes: to see a lock's key, or to delete it and make its holder lose
// it. Do not Close it; it is closed when the test ends.
func (s *Server) Redis() redis.UniversalClient { return s.redis }

// newOptions is a fresh copy of the options of a connection to the server
// (go-redis keeps a pointer to them and fills in defaults).
func (s *Server) newOptions() *redis.Options {
	o := s.opts
	return &o
}

// dropTime leaves the time out of log lines: the test log has its own.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// testLog writes log lines to the test's log until the test ends; a line
// written after that (by nothing locktest started) is dropped, since
// logging after a test ended panics.
type testLog struct {
	t       TB
	mu      sync.Mutex
	stopped bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Logf("%s", strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
}

// String says where the server is, for messages: the in-process Redis'
// address, or the host and port of LOCKGEN_TEST_REDIS (never a password).
func (s *Server) String() string { return s.where }
