package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// holdBackKey marks the ctx of the waiter whose tries holdBack stops.
type holdBackKey struct{}

// holdBack stops, while armed, the acquire calls of the waiter whose ctx
// carries holdBackKey before they are sent: that waiter is then woken and
// in its try for as long as the test likes.
type holdBack struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (h *holdBack) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdBack) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdBack) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if ctx.Value(holdBackKey{}) != nil && isScriptCall(cmd.Args(), lua.Acquire.Hash()) && h.armed.CompareAndSwap(true, false) {
			close(h.entered)
			<-h.release
		}
		return next(ctx, cmd)
	}
}

// An offer that ends in an unlock message (another client listens) leaves
// its waiter as it was: asleep, and next in line. Here the unlock message
// wakes the waiter ahead of it (woken before, and still in its try), so
// the offered waiter is left asleep; the next release, once the other
// client has gone, must hand the lock to it, not to the waiter behind it.
func TestLocalHandoffOfferThatPublishedKeepsTheWaitersPlace(t *testing.T) {
	hb := &holdBack{entered: make(chan struct{}), release: make(chan struct{})}
	s := redistest.Start(t)
	rdb := s.Client(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	for _, sc := range []*redis.Script{lua.Acquire, lua.Handoff, lua.Release} {
		sc.Load(ctx, plain)
	}
	rdb.AddHook(hb)
	c := newClient(t, rdb, nil)
	m := c.Mutex("k", runtime.LockOptions{})
	channel := "redisson_lock__channel:{k}"

	// Another client (a Redisson one, say) listens on the lock's channel.
	foreign := plain.Subscribe(ctx, channel)
	if _, err := foreign.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	done := make(chan error, 3)
	wait := func(ctx context.Context, name string) {
		hctx, err := m.Lock(ctx)
		if err == nil {
			order <- name
			err = m.Unlock(hctx)
		}
		done <- err
	}
	go wait(context.WithValue(ctx, holdBackKey{}, true), "first")
	eventually(t, 5*time.Second, "first waiter asleep", func() bool { return runtime.IdleWaiters(m) == 1 })
	go wait(ctx, "second")
	eventually(t, 5*time.Second, "second waiter asleep", func() bool { return runtime.IdleWaiters(m) == 2 })
	go wait(ctx, "third")
	eventually(t, 5*time.Second, "third waiter asleep", func() bool { return runtime.IdleWaiters(m) == 3 })

	// A stray unlock message wakes the first waiter; its try is held back.
	hb.armed.Store(true)
	if err := plain.Publish(ctx, channel, "0").Err(); err != nil {
		t.Fatal(err)
	}
	<-hb.entered
	// The release is offered to the second waiter, but publishes (the
	// other client listens); its message wakes the first waiter again.
	if err := m.Unlock(held); err != nil {
		t.Fatal(err)
	}
	msgs := foreign.Channel()
	for range 2 { // the stray message, then the release's
		select {
		case <-msgs:
		case <-time.After(5 * time.Second):
			t.Fatal("the other client got no unlock message")
		}
	}
	// The other client goes; then only this Client listens.
	if err := foreign.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the other client unsubscribed", func() bool {
		return plain.PubSubNumSub(ctx, channel).Val()[channel] == 1
	})
	close(hb.release)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	close(order)
	var got []string
	for name := range order {
		got = append(got, name)
	}
	if len(got) != 3 || got[0] != "first" || got[1] != "second" || got[2] != "third" {
		t.Fatalf("waiters got the lock in the order %v, want first, second, third", got)
	}
}
