package lockgen

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

// Specs lockgen accepts whose every acquisition the runtime refuses.
func TestZZAcceptedSpecsTheRuntimeAlwaysRefuses(t *testing.T) {
	spec := "version: 1\npackage: locks\nlocks:\n" +
		"  EmptyTag:\n    key: \"order:{}:${id}\"\n    params: {id: int64}\n" +
		"  FairQ:\n    kind: fair\n    key: \"fair:${id}\"\n    params: {id: int64}\n    fairness: {queueTimeout: 1ms}\n"
	s, err := Parse("locks.yaml", []byte(spec))
	if err != nil {
		t.Fatalf("rejected (then this bug is fixed): %v", err)
	}
	mr := miniredis.RunT(t)
	c, err := runtime.NewClient(redis.NewClient(&redis.Options{Addr: mr.Addr()}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, l := range s.Locks {
		m := lockModel(l)
		opts := runtime.LockOptions{QueueTimeout: m.QueueTimeout}
		key := "order:{}:1"
		h := c.Mutex(key, opts)
		if l.Kind == Fair {
			key = "fair:1"
			h = c.FairLock(key, opts)
		}
		err := h.Do(ctx, func(context.Context) error { return nil })
		if err != nil {
			t.Errorf("%s: lockgen accepts the spec (locks.yaml:%d:%d), the runtime refuses every acquisition: %v", l.Name, l.Pos.Line, l.Pos.Col, err)
		}
	}
}
