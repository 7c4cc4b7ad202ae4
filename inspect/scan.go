package inspect

import (
	"context"
	"sort"
	"sync"

	"github.com/redis/go-redis/v9"
)

// scanBatch is SCAN's COUNT: how many keys one call looks at.
const scanBatch = 1000

// scanKeys finds up to limit keys of type typ that m matches, with SCAN on
// every master (or only on the master of m's literal hash tag), sorted.
// truncated reports that more exist.
func scanKeys(ctx context.Context, rdb redis.UniversalClient, m *matcher, typ string, limit int) (keys []string, truncated bool, err error) {
	var mu sync.Mutex
	found := map[string]bool{}
	scan := func(ctx context.Context, node redis.UniversalClient) error {
		var cursor uint64
		for {
			page, next, err := node.ScanType(ctx, cursor, m.glob, scanBatch, typ).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range page {
				if _, ok := m.match(k); ok {
					found[k] = true
				}
			}
			full := len(found) > limit
			mu.Unlock()
			if next == 0 || full {
				return nil
			}
			cursor = next
		}
	}
	switch cc, ok := rdb.(*redis.ClusterClient); {
	case !ok:
		err = scan(ctx, rdb)
	case m.tag != "":
		var node *redis.Client
		if node, err = cc.MasterForKey(ctx, m.tag); err == nil {
			err = scan(ctx, node)
		}
	default:
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	}
	if err != nil {
		return nil, false, err
	}
	for k := range found {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > limit {
		return keys[:limit], true, nil
	}
	return keys, false, nil
}
