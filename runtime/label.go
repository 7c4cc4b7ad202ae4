package runtime

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The owner label: who a Client is, for people reading Redis.
//
// An owner token "<client uuid>:<n>" names a Client, not a process. So
// that `lockgen inspect` (and anyone with redis-cli) can say which process
// holds a lock, every Client that holds a lock keeps a small hash at
// OwnerLabelKey(uuid):
//
//	lockgen_owner:<uuid>   host <hostname>  pid <pid>  name <Options.Name>  since <epoch ms>
//
// It is written when the Client's watchdog loop starts (at its first
// hold, of any lease) and rewritten with a TTL of WatchdogTimeout every
// WatchdogTimeout/3 by that loop, like a watchdog renewal, for as long as
// the Client is open. A process that dies leaves it for one
// WatchdogTimeout, as long as its watchdog holds. The name starts with
// "lockgen_", which no Redisson key or channel does, and it is a single
// key, so it may live in any cluster slot. A lock whose owner has no label
// is held by a Redisson client (which writes none), or by a lockgen client
// whose label has expired (its process is gone, or it held a fixed lease
// longer than WatchdogTimeout when it died).

// OwnerLabelKey is the key of the label of the Client whose ID is uuid.
func OwnerLabelKey(uuid string) string { return "lockgen_owner:" + uuid }

// OwnerLabel is what a Client's label key holds.
type OwnerLabel struct {
	Host  string    // os.Hostname() of the process
	PID   int       // os.Getpid() of the process
	Name  string    // Options.Name; empty when not set
	Since time.Time // when the Client was created
}

// ParseOwnerLabel reads a label from the fields of its hash (HGETALL). It
// reports false when fields holds no label.
func ParseOwnerLabel(fields map[string]string) (OwnerLabel, bool) {
	pid, err := strconv.Atoi(fields["pid"])
	if err != nil {
		return OwnerLabel{}, false
	}
	l := OwnerLabel{Host: fields["host"], PID: pid, Name: fields["name"]}
	if ms, err := strconv.ParseInt(fields["since"], 10, 64); err == nil {
		l.Since = time.UnixMilli(ms)
	}
	return l, true
}

// ownerLabel is a Client's label and when it is next due to be written.
// Only the watchdog loop touches next.
type ownerLabel struct {
	id     string // the uuid its owner tokens carry (a RedLock node's: its parent's)
	fields []any  // HSET's field-value pairs, built once
	next   time.Time
}

func (l *ownerLabel) init(id, name string, since time.Time) {
	l.id = id
	host, _ := os.Hostname()
	l.fields = []any{
		"host", host,
		"pid", strconv.Itoa(os.Getpid()),
		"name", name,
		"since", strconv.FormatInt(since.UnixMilli(), 10),
	}
}

// renewLabel writes the label when it is due (every watchdog period), in a
// renewal job of its own: the loop never waits for Redis. Called by the
// watchdog loop only.
func (w *watchdog) renewLabel(now time.Time) {
	c := w.c
	if now.Before(c.label.next) {
		return
	}
	c.label.next = now.Add(w.timing.Period)
	w.jobs.Add(1)
	go func() {
		defer w.jobs.Done()
		ctx, cancel := context.WithTimeout(c.life, w.timing.Period)
		defer cancel()
		key := OwnerLabelKey(c.label.id)
		// The watchdog's own client: it honours ctx, and Close closes it,
		// so a write stuck in a blackhole never holds up Close.
		_, err := w.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, key, c.label.fields...)
			p.PExpire(ctx, key, c.opts.WatchdogTimeout)
			return nil
		})
		if err != nil && c.life.Err() == nil {
			c.log.Debug("writing the owner label failed", "key", key, "err", err)
		}
	}()
}
