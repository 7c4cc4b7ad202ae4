package watchdog

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
)

// Holds outlive many leases while their scripts are flushed again and
// again (SCRIPT FLUSH, a restart): each NOSCRIPT reply is sent again as a
// full EVAL, which needs no SCRIPT LOAD (here also refused by an ACL), and
// never is a renewal left unsent for it.
func TestHoldsOutliveScriptFlushesWithOrWithoutScriptLoad(t *testing.T) {
	for _, load := range []bool{true, false} {
		t.Run(map[bool]string{true: "load allowed", false: "load refused"}[load], func(t *testing.T) {
			srv := redistest.Start(t)
			admin := srv.Client(t)
			ctx := context.Background()
			rule := "+@all"
			if !load {
				rule = "-script|load"
			}
			if err := admin.Do(ctx, "ACL", "SETUSER", "wd", "on", ">pw", "~*", "&*", "+@all", rule).Err(); err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "wd", Password: "pw"})
			t.Cleanup(func() { _ = rdb.Close() })
			if err := rdb.ScriptLoad(ctx, "return 1").Err(); (err != nil) == load {
				t.Fatalf("SCRIPT LOAD as the ACL user: %v", err)
			}
			f := newFixtureOn(t, rdb)
			a := f.hold(t, "{a}", "o1")
			b := f.hold(t, "{b}", "o2")
			for end := time.Now().Add(5 * lease / 2); time.Now().Before(end); time.Sleep(lease / 10) {
				if err := admin.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for _, h := range []context.Context{a, b} {
				if h.Err() != nil {
					t.Fatalf("a hold ended after %v of renewals through NOSCRIPT: %v", 5*lease/2, context.Cause(h))
				}
			}
			for _, key := range []string{"{a}", "{b}"} {
				if ttl := admin.PTTL(ctx, key).Val(); ttl <= 0 || ttl > lease {
					t.Errorf("%s: PTTL %v, want in (0, %v]", key, ttl, lease)
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.renewed < 2*4 {
				t.Errorf("%d renewals confirmed in %v, want at least 8", f.renewed, 5*lease/2)
			}
		})
	}
}
