package runtime_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// A Client without Options.Logger writes nothing to the default logger
// at its default level: not when it starts, not when Redis is gone, not
// when it loses a hold. With debug logging on, the same records appear.
func TestAClientIsQuietUnlessAskedToLog(t *testing.T) {
	var buf syncBuffer
	defer slog.SetDefault(slog.Default())
	level := new(slog.LevelVar)
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})))

	s := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := runtime.NewClient(rdb, &runtime.Options{WatchdogTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hctx, err := c.Mutex("quiet", runtime.LockOptions{}).TryLock(context.Background(), 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	s.Kill() // renewals fail, the hold is lost
	<-hctx.Done()
	time.Sleep(100 * time.Millisecond)
	if buf.Len() > 0 {
		t.Fatalf("the Client wrote to the default logger at Info level:\n%s", buf.String())
	}

	level.Set(slog.LevelDebug)
	c2, err := runtime.NewClient(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = c2.Close()
	if !strings.Contains(buf.String(), "level=DEBUG") || !strings.Contains(buf.String(), "pub/sub flavour chosen") {
		t.Fatalf("with debug logging on, nothing was logged at Debug:\n%s", buf.String())
	}
}

// Warnings of one kind come in bursts when Redis is down (one per lost
// hold); the Logger gets one per interval, and the next one counts the
// rest.
func TestRepeatedWarningsAreLoggedOncePerInterval(t *testing.T) {
	var buf syncBuffer
	s := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb, &runtime.Options{WatchdogTimeout: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	var holds []context.Context
	for i := range 50 {
		h, err := c.Mutex("burst:"+string(rune('a'+i%26))+string(rune('a'+i/26)), runtime.LockOptions{}).TryLock(context.Background(), 0, runtime.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	s.Kill()
	for _, h := range holds {
		<-h.Done()
	}
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(buf.String(), `msg="lock lost"`); n != 1 {
		t.Fatalf("50 holds lost together logged %d 'lock lost' warnings, want 1:\n%s", n, buf.String())
	}
}

// syncBuffer is a bytes.Buffer that a test may read while a Client's
// goroutines still write to it: the first Client of
// TestAClientIsQuietUnlessAskedToLog, its server killed, logged its
// failed owner-label renewal at Debug as the test read the buffer (a
// data race the race detector reported in a full run).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}
