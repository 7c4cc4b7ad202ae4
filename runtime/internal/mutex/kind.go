package mutex

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Kind names the flavour of a lock: what sets the flavours apart, their
// scripts included, is a method of Kind.
type Kind uint8

const (
	Reentrant Kind = iota // Redisson's RLock (Client.Mutex, FencedLock)
	Fair                  // RFairLock
	Read                  // the read side of an RReadWriteLock
	Write                 // its write side
)

// kindNames are the Kinds' names in events, describe in errors.
var (
	kindNames = [...]string{Reentrant: "reentrant", Fair: "fair", Read: "read", Write: "write"}
	describe  = [...]string{Reentrant: "a reentrant lock", Fair: "a fair lock",
		Read: "the read side of a read-write lock", Write: "the write side of a read-write lock"}
)

// field is the hash field that proves owner's hold.
func (k Kind) field(owner string) string {
	if k == Write {
		return writeField(owner)
	}
	return owner
}

// channel is the channel a waiter of owner sleeps on: a fair waiter has
// its own; the sides of a read-write lock share one.
func (k Kind) channel(key, owner string) string {
	switch k {
	case Fair:
		return LockChannel(key) + ":" + owner
	case Read, Write:
		return rwChannel(key)
	}
	return LockChannel(key)
}

// extraKeys are the keys renewed with a hold besides the hash: a read hold's timeout keys.
func (k Kind) extraKeys(key, owner string, count int) []string {
	if k != Read {
		return nil
	}
	keys := make([]string, count)
	for i := range keys {
		keys[i] = readTimeoutKey(key, owner, i+1)
	}
	return keys
}

// waits reports whether a waiter of m leaves traces in Redis to withdraw when it gives up.
func (k Kind) waits(m *Lock) bool {
	switch k {
	case Reentrant:
		return m.handsOff()
	case Fair:
		return true
	case Write:
		return m.opts.WritersFirst
	}
	return false
}

// refreshEvery bounds a waiter's sleep so it refreshes its place before
// its record runs out (0: no bound); with writers first a reader behind
// a writer looks again as often as the writer's record could expire.
func (k Kind) refreshEvery(m *Lock) time.Duration {
	switch {
	case k == Reentrant && m.handsOff():
		return grantRecordLife / 2
	case k == Fair:
		return m.opts.QueueTimeout / 3
	case (k == Read || k == Write) && m.opts.WritersFirst:
		return m.env.Watchdog / 3
	}
	return 0
}

// attempt is one acquire or release call.
type attempt struct {
	via     scripts.Runner // where the script runs
	px      any            // lease in ms, as a script argument
	marker  string         // acquire: the request's marker key (lockenv.RequestMarker)
	count   int            // the owner's hold count before the call
	waiting bool           // acquire: the caller waits if not taken
	fence   *int64         // acquire of a fenced lock: receives the token
	grant   bool           // acquire of a fair lock: a release may grant it
	queued  bool           // acquire: registers the waiter for grants (grant.go)
	grantPx any            // the lease a grant takes with it ("0": none)
}

// acquire runs the kind's acquire script once: 0 taken, > 0 sleep
// bound in ms, -1 no expiry, or a reply code (replyAborted...).
func (k Kind) acquire(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	c, key := m.env, m.key
	switch {
	case k == Fair:
		grant := "0"
		if at.grant { // the lease to grant, and the try's nonce for the message
			grant = fmt.Sprint(at.px) + ":" + at.marker
		}
		return scripts.FairAcquire.Run(ctx, at.via, 6, []any{
			3: a.Key, fairQueue(key), fairTimeouts(key), at.marker, fairWaiters(key), fairGrants(key),
			at.px, a.Owner, m.opts.QueueTimeout.Milliseconds(), at.count, c.MarkerTTL, flag(at.waiting),
			LockChannel(key), c.Publish, grant,
		}).Int64()
	case k == Read:
		owner := a.OwnerID()
		return scripts.ReadAcquire.Run(ctx, at.via, 4, []any{
			3: a.Key, readTimeoutKey(key, owner, at.count+1), at.marker, rwWriters(key),
			at.px, a.Owner, writeField(owner), at.count, c.MarkerTTL, flag(m.opts.WritersFirst),
		}).Int64()
	case k == Write:
		return scripts.WriteAcquire.Run(ctx, at.via, 3, []any{
			3: a.Key, at.marker, rwWriters(key),
			at.px, a.Field, a.Owner, at.count, c.MarkerTTL, flag(m.opts.WritersFirst && at.waiting),
			c.Watchdog.Milliseconds(),
		}).Int64()
	case m.opts.Fenced:
		return fencedAcquire(ctx, m, a, at)
	case at.queued:
		n := m.grantNames()
		return scripts.Acquire.Run(ctx, at.via, 5, []any{
			3: a.Key, at.marker, n.queue, n.records, n.hubs,
			at.px, a.Owner, at.count, c.MarkerTTL, at.grantPx, grantRecordLifeArg, c.IDArg,
		}).Int64()
	}
	return scripts.Acquire.Run(ctx, at.via, 2, []any{3: a.Key, at.marker, at.px, a.Owner, at.count, c.MarkerTTL}).Int64()
}

// fencedAcquire is Kind.acquire for a fenced lock, writing the token to *at.fence.
func fencedAcquire(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	res, err := scripts.FencedAcquire.Run(ctx, at.via, 3, []any{
		3: a.Key, at.marker, tokenKey(m.key),
		at.px, a.Owner, at.count, m.env.MarkerTTL,
	}).Int64Slice()
	switch {
	case err != nil:
		return 0, err
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

// release runs the kind's release script once: nil reply (redis.Nil)
// not held, 0 partial, 1 last. Without go-redis' resends (RunOnce): its
// callers resend it themselves (calls.Limits), and so see every attempt
// that got no reply, after which a resend may find the hold released.
func (k Kind) release(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	c, key := m.env, m.key
	switch k {
	case Fair:
		return scripts.FairRelease.RunOnce(ctx, at.via, 5, []any{
			3: a.Key, fairQueue(key), fairTimeouts(key), fairWaiters(key), fairGrants(key),
			at.px, a.Owner, c.Publish, at.count, LockChannel(key),
		}).Int64()
	case Read:
		return scripts.ReadRelease.RunOnce(ctx, at.via, 4, []any{
			3: a.Key, rwChannel(key), readTimeoutKey(key, a.OwnerID(), at.count), readTimeoutPrefix(key),
			a.Owner, c.Publish, at.count,
		}).Int64()
	case Write:
		return scripts.WriteRelease.RunOnce(ctx, at.via, 3, []any{
			3: a.Key, rwChannel(key), readTimeoutPrefix(key), at.px, a.Field, c.Publish, at.count,
		}).Int64()
	}
	return scripts.Release.RunOnce(ctx, at.via, 2, []any{3: a.Key, LockChannel(key), at.px, a.Owner, c.Publish, at.count}).Int64()
}

// leave withdraws a waiter that gave up (when Kind.waits); the fair
// and reentrant scripts also give back a grant it never took (untaken:
// untakenGrant).
func (k Kind) leave(ctx context.Context, m *Lock, a lockArgs, untaken string) (int64, error) {
	c, key := m.env, m.key
	switch k {
	case Fair:
		return scripts.FairLeave.Run(ctx, c.RDB, 5, []any{
			3: a.Key, fairQueue(key), fairTimeouts(key), fairWaiters(key), fairGrants(key),
			a.Owner, LockChannel(key), c.Publish, untaken,
		}).Int64()
	case Write:
		return scripts.WriteLeave.Run(ctx, c.RDB, 3, []any{3: a.Key, rwChannel(key), rwWriters(key), a.Field, c.Publish}).Int64()
	}
	n := m.grantNames()
	return scripts.MutexLeave.Run(ctx, c.RDB, 5, []any{
		3: a.Key, n.lockCh, n.queue, n.records, n.hubs,
		a.Owner, c.Publish, untaken, n.lockCh,
	}).Int64()
}

// forceUnlock deletes the lock whoever holds it, sent once.
func (k Kind) forceUnlock(ctx context.Context, m *Lock) (int64, error) {
	c, key := m.env, m.key
	switch k {
	case Fair:
		return scripts.FairForceUnlock.RunOnce(ctx, c.RDB, 2, []any{3: key, fairQueue(key), hub.UnlockMessage, c.Publish, LockChannel(key)}).Int64()
	case Read, Write:
		return scripts.RWForceUnlock.RunOnce(ctx, c.RDB, 2, []any{3: key, rwChannel(key), c.Publish}).Int64()
	}
	return scripts.ForceUnlock.RunOnce(ctx, c.RDB, 2, []any{3: key, LockChannel(key), hub.UnlockMessage, c.Publish}).Int64()
}

// The keys and channels, named by Redisson's helpers (package redisnames)
// so that both find the same ones, all in the lock's cluster slot.

// LockChannel is the channel a reentrant lock publishes its unlock message on.
func LockChannel(key string) string { return redisnames.Prefix("redisson_lock__channel", key) }

// tokenKey names a fenced lock's token counter (Redisson's getTokenName).
func tokenKey(key string) string { return redisnames.Prefix("redisson_lock_token", key) }

// A read-write lock has RReadWriteLock's layout: one hash at the key with
// field "mode" (read | write), one field per reading owner with its hold
// count, and "<owner>:write" for the writer; each read hold n also has
// its own key {key}:<owner>:rwlock_timeout:<n>, renewed with the hash.

func rwChannel(key string) string { return redisnames.Prefix("redisson_rwlock", key) }

// rwWriters is the set of waiting writers (writers first).
func rwWriters(key string) string { return redisnames.Prefix("lockgen_rwlock_writers", key) }

func writeField(owner string) string { return owner + ":write" }

// readTimeoutKey is the key of read hold n of owner.
func readTimeoutKey(key, owner string, n int) string {
	return redisnames.Suffix(key, owner) + ":rwlock_timeout:" + strconv.Itoa(n)
}

// readTimeoutPrefix starts every read hold's timeout key of the lock:
// read_release.lua builds the other readers' keys from it, as Redisson's
// read unlock does.
func readTimeoutPrefix(key string) string {
	if strings.Contains(key, "{") {
		return key
	}
	return "{" + key + "}"
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
