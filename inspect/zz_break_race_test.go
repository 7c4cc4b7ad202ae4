package inspect_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/runtime"
)

// TestZZConcurrentReadsRace: many instances of every kind held by several
// labelled clients, read by Summary and Instances (concurrent readers
// sharing labels, prefixes, lockgen marks) under -race.
func TestZZConcurrentReadsRace(t *testing.T) {
	in, rdb := inspector(t)
	ctx := context.Background()
	var clients []*runtime.Client
	for i := range 4 {
		c := lockClient(t, rdb, runtime.Options{Name: "w" + strconv.Itoa(i)})
		clients = append(clients, c)
	}
	for i := range 40 {
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
			if err != nil || len(got) != 40 {
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
	_ = inspect.DefaultLimit
}
