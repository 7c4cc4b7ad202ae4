package inspect_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/runtime"
)

// failOwnerReads is a go-redis hook that fails every read of the owner
// labels (HGETALL lockgen_owner:<uuid>, SCAN MATCH lockgen_owner:*) with
// fail(ctx): the view's other reads go through.
type failOwnerReads struct {
	fail func(ctx context.Context) error
}

func (failOwnerReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h failOwnerReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if readsOwner(cmd) {
			err := h.fail(ctx)
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h failOwnerReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if readsOwner(c) {
				err := h.fail(ctx)
				for _, c := range cmds {
					c.SetErr(err)
				}
				return err
			}
		}
		return next(ctx, cmds)
	}
}

func readsOwner(cmd redis.Cmder) bool {
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.HasPrefix(s, runtime.OwnerLabelKey("")) {
			return true
		}
	}
	return false
}

// TestInspectFailsAViewWhoseOwnerLabelsCannotBeRead: when the owner label
// reads fail (the view's deadline passes during them, or the connection
// drops), the view fails. It used to succeed and show the holders of a
// labelled lockgen client as having no label, i.e. as Redisson's.
func TestInspectFailsAViewWhoseOwnerLabelsCannotBeRead(t *testing.T) {
	in, rdb := inspector(t)
	ctx := context.Background()
	c := lockClient(t, rdb, runtime.Options{Name: "worker"})
	hold(t, ctx, c.Mutex("order:1", runtime.LockOptions{Name: "OrderLock"}))
	if _, err := c.Semaphore("payslots:acme", runtime.SemaphoreOptions{Name: "PaymentSlots", Permits: 3}).TryAcquire(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	labelled(t, rdb, c)

	broken := errors.New("read tcp: connection reset by peer")
	for name, fail := range map[string]func(ctx context.Context) error{
		"deadline": func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
		"broken":   func(context.Context) error { return broken },
	} {
		t.Run(name, func(t *testing.T) {
			slow := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr})
			t.Cleanup(func() { _ = slow.Close() })
			slow.AddHook(failOwnerReads{fail})
			sin := &inspect.Inspector{Spec: in.Spec, Redis: slow}
			views := map[string]func(ctx context.Context) (any, error){
				"Instances OrderLock": func(ctx context.Context) (any, error) {
					list, _, err := sin.Instances(ctx, "OrderLock")
					return list, err
				},
				"Instance OrderLock": func(ctx context.Context) (any, error) {
					return sin.Instance(ctx, "OrderLock", map[string]string{"orderID": "1"})
				},
				"Instances PaymentSlots": func(ctx context.Context) (any, error) {
					list, _, err := sin.Instances(ctx, "PaymentSlots")
					return list, err
				},
			}
			for view, read := range views {
				vctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				got, err := read(vctx)
				cancel()
				if err == nil {
					t.Errorf("%s: succeeded with its owner labels unread: %+v", view, got)
				}
			}
		})
	}
}

// TestInspectLabelsEveryOwnerOfManyInstances: instances of several kinds
// held by several labelled clients, read by Summary and Instances (whose
// concurrent reads share the reader's labels, permit prefixes and lockgen
// marks; run under -race): every holder and permit shows its label.
func TestInspectLabelsEveryOwnerOfManyInstances(t *testing.T) {
	in, rdb := inspector(t)
	ctx := context.Background()
	var clients []*runtime.Client
	for i := range 4 {
		c := lockClient(t, rdb, runtime.Options{Name: "w" + strconv.Itoa(i)})
		clients = append(clients, c)
	}
	const n = 24
	for i := range n {
		c := clients[i%len(clients)]
		k := strconv.Itoa(i)
		hold(t, ctx, c.Mutex("order:"+k, runtime.LockOptions{Name: "OrderLock"}))
		hold(t, ctx, c.FairLock("inventory:"+k, runtime.LockOptions{Name: "InventoryLock"}))
		s := c.Semaphore("payslots:"+k, runtime.SemaphoreOptions{Name: "PaymentSlots", Permits: 3})
		if _, err := s.TryAcquire(ctx, 1, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := clients[(i+1)%len(clients)].Semaphore("payslots:"+k, runtime.SemaphoreOptions{Name: "PaymentSlots", Permits: 3}).TryAcquire(ctx, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range clients {
		labelled(t, rdb, c)
	}
	for range 3 {
		list, err := in.Summary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.Error != "" {
				t.Errorf("%s: %s", s.Lock, s.Error)
			}
		}
		for _, name := range []string{"OrderLock", "InventoryLock", "PaymentSlots"} {
			got, _, err := in.Instances(ctx, name)
			if err != nil || len(got) != n {
				t.Fatalf("%s: %d, %v", name, len(got), err)
			}
			for _, st := range got {
				for _, h := range st.Holders {
					if h.Who.NoLabel {
						t.Errorf("%s %s: holder %s without label", name, st.Key, h.Owner)
					}
				}
				for _, p := range st.Permits {
					if p.Who == nil || p.Who.NoLabel {
						t.Errorf("%s %s: permit %+v without owner", name, st.Key, p)
					}
				}
			}
		}
	}
}
