package watchdog

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Label is a Client's owner label (runtime.OwnerLabelKey): a hash at Key
// with HSET's field-value pairs Fields, rewritten with a TTL of the lease
// every period for as long as the Client is open, so that lockgen inspect
// can tell which process holds a lock.
type Label struct {
	Key    string
	Fields []any
}

// renewLabel writes the label when it is due, in a job of its own.
func (w *Watchdog) renewLabel(now time.Time) {
	if now.Before(w.labelNext) {
		return
	}
	w.labelNext = now.Add(w.timing.Period)
	w.jobs.Add(1)
	go func() {
		defer w.jobs.Done()
		cfg, key := &w.cfg, w.cfg.Label.Key
		ctx, cancel := context.WithTimeout(cfg.Life, w.timing.Period)
		defer cancel()
		_, err := cfg.Renewal.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, key, cfg.Label.Fields...)
			p.PExpire(ctx, key, cfg.Registry.WatchdogLease())
			return nil
		})
		if err != nil && cfg.Life.Err() == nil {
			cfg.Log.Debug("writing the owner label failed", "key", key, "err", err)
		}
	}()
}
