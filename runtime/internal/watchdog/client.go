package watchdog

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
)

// DeadlineClient returns a client that honours ctx deadlines for rdb's
// server(s), and a func that closes it if it is lockgen's own: rdb itself
// when it does (ContextTimeoutEnabled), else one built from rdb's options
// with ContextTimeoutEnabled and poolSize connections. go-redis honours a
// deadline on socket reads and between retries only then: otherwise a
// renewal stuck on a dead connection, retried, may extend the key long
// after the holder was told the hold is gone. A Sentinel failover client
// cannot be rebuilt from its options: it is used as it is (bounded false),
// and CheckUnbounded checks its timeouts. A client built has its own
// push-notification state (the one in rdb's options is rdb's).
func DeadlineClient(rdb redis.UniversalClient, poolSize int) (_ redis.UniversalClient, closeFn func() error, bounded bool) {
	noMaint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	switch r := rdb.(type) {
	case *redis.Client:
		o := *r.Options()
		if o.ContextTimeoutEnabled || o.Addr == "FailoverClient" {
			return rdb, nil, o.ContextTimeoutEnabled
		}
		o.ContextTimeoutEnabled, o.PoolSize = true, poolSize
		o.PushNotificationProcessor, o.MaintNotificationsConfig = nil, noMaint
		c := redis.NewClient(&o)
		return c, c.Close, true
	case *redis.ClusterClient:
		o := *r.Options()
		if o.ContextTimeoutEnabled {
			return rdb, nil, true
		}
		o.ContextTimeoutEnabled, o.PoolSize = true, poolSize
		o.PushNotificationProcessor, o.MaintNotificationsConfig = nil, noMaint
		// One dial per attempt: go-redis' dial retries (5, 100 ms apart)
		// would keep a renewal on a dead master past its replica's promotion.
		o.DialerRetries = 1
		c := redis.NewClusterClient(&o)
		return c, c.Close, true
	}
	return rdb, nil, false
}

// CheckUnbounded refuses a WatchdogTimeout that a renewal on rdb cannot
// keep when rdb does not honour ctx deadlines (a Sentinel failover client
// without ContextTimeoutEnabled): a renewal may take DialTimeout +
// ReadTimeout, and land after the holder was told the hold is gone.
func CheckUnbounded(rdb redis.UniversalClient, watchdog time.Duration) error {
	r, ok := rdb.(*redis.Client)
	if !ok {
		return nil
	}
	o := r.Options()
	window := watchdog*2/3 - leaseclock.Drift(watchdog)
	if o.ReadTimeout < 0 {
		return fmt.Errorf("%w: the Redis client has no read timeout and does not honour ctx deadlines (ContextTimeoutEnabled is off): "+
			"a renewal could hang past any lease; set ContextTimeoutEnabled: true on the client", errs.InvalidArgument)
	}
	if need := o.DialTimeout + o.ReadTimeout; need > window {
		return fmt.Errorf("%w: WatchdogTimeout %v leaves a renewal %v, but the Redis client's DialTimeout %v + ReadTimeout %v = %v, "+
			"and it does not honour ctx deadlines (ContextTimeoutEnabled is off): set ContextTimeoutEnabled: true on the client, "+
			"or a WatchdogTimeout of at least %v", errs.InvalidArgument, watchdog, window, o.DialTimeout, o.ReadTimeout, need,
			minWatchdog(need))
	}
	return nil
}

// minWatchdog is the shortest WatchdogTimeout, in whole seconds, whose
// renewal window fits need.
func minWatchdog(need time.Duration) time.Duration {
	for wd := time.Second; ; wd += time.Second {
		if wd*2/3-leaseclock.Drift(wd) >= need {
			return wd
		}
	}
}
