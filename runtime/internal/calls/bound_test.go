package calls

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// doc.go: "a call made through Limits returns by its limit" (Limit: the
// earlier of ReleaseTimeout and the call's bound). On a client that does
// not honour ctx deadlines (ContextTimeoutEnabled off: NewClient accepts
// one, with a warning), scripts runs the call aside and waits for it until
// max(ctx deadline, call bound): a release made inside a call with a far
// bound outlives ReleaseTimeout by up to that bound.
func TestRetryReturnsByItsLimitOnAClientWithoutCtxDeadlines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ReadTimeout: 3 * time.Second, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	defer rdb.Close()
	k := Limits{Timeout: 100 * time.Millisecond}
	ctx := scripts.WithCallBound(context.Background(), time.Now().Add(2*time.Second))
	start := time.Now()
	_, err = k.Retry(ctx, func(ctx context.Context) (int64, error) {
		return scripts.Do(ctx, rdb, "get", "k").Int64()
	})
	took := time.Since(start)
	t.Logf("Retry: %v after %v", err, took)
	if took > 300*time.Millisecond {
		t.Fatalf("Retry with a 100ms ReleaseTimeout returned after %v (its limit was 100ms)", took)
	}
}
