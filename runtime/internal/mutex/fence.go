package mutex

import (
	"context"
	"fmt"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// tokenKey names a fenced lock's token counter (Redisson's getTokenName).
func tokenKey(key string) string { return redisnames.Prefix("redisson_lock_token", key) }

// fencedAcquire is reentrant.acquire for a fenced lock: the same reply,
// with the token written to *at.fence when taken.
func fencedAcquire(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	res, err := scripts.FencedAcquire.Run(ctx, at.via, 3, []any{
		3: a.Key, at.marker, tokenKey(m.key),
		at.px, a.Owner, at.count, m.env.MarkerTTL,
	}).Int64Slice()
	if err != nil {
		return 0, err
	}
	switch {
	case len(res) == 2 && res[0] == 0:
		if at.fence != nil {
			*at.fence = res[1]
		}
		return 0, nil
	case len(res) == 1 && res[0] != 0:
		return res[0], nil
	}
	return 0, fmt.Errorf("lockgen: fenced_acquire.lua replied %v", res)
}
