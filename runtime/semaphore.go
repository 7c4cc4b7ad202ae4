package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/mutex"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// SemaphoreOptions describes one semaphore: what the generated code
// declares from locks.yaml (kind: semaphore).
type SemaphoreOptions struct {
	// Name is the logical name (e.g. "SeatPool"), used in errors, logs and
	// events. Optional.
	Name string
	// Permits is the number of permits a fresh semaphore starts with: an
	// acquire that finds the free count absent sets it to Permits minus the
	// permits held (Redisson's trySetPermits, "set if absent", made part
	// of the acquire so nothing has to arm the semaphore first). Zero
	// leaves an absent count absent: nothing can be acquired until
	// TrySetPermits, SetPermits or AddPermits sets it.
	Permits int
	// Lease is how long each held permit lasts: Watchdog (0) renews it
	// while held, a fixed duration > 0 lets it run out. Either way a
	// holder that crashes gives its permit back when the lease ends.
	Lease time.Duration
	// WaitTime is how long Do waits for a permit: 0 tries once, Forever
	// (any negative value) waits until the ctx is done.
	WaitTime time.Duration
}

// Semaphore is a handle on a permit-expirable semaphore: at most a number
// of holders at once, each permit with its own lease. It plays the part of
// Redisson's RPermitExpirableSemaphore, with its layout: the free count at
// Key (a decimal integer), the held permits in the sorted set
// {Key}:timeout (member: a 16-byte random permit id, score: the permit's
// expiry in epoch ms), and the channel redisson_sc:{Key}, whose payload
// is the free count after a release, which wakes that many waiters.
//
// Every script first reclaims the permits whose expiry has passed, so a
// holder that crashed or was cut off gives its permits back after its
// lease, whoever calls next. A waiter sleeps until a release's message or
// the nearest expiry among the held permits, whichever comes first.
//
// Acquire, TryAcquire and Do hand out the ctx of the hold, as a lock's do:
// it is cancelled with a cause wrapping ErrLockLost when the permits are
// known to be gone (their keys deleted, a renewal that found them missing,
// or a lease that ran out unconfirmed). Release takes that ctx. Permits are
// not reentrant: an acquisition with the ctx of another takes new permits.
//
// Expiry scores are stamped with the Redis server's clock (TIME), so the
// hosts' clocks do not matter to lockgen clients; a Java client on the
// same semaphore stamps and reclaims with its own host's clock.
//
// A Semaphore is a cheap handle, safe for concurrent use.
type Semaphore struct {
	c        *Client
	key      string
	timeouts string
	channel  string
	opts     SemaphoreOptions
}

// Key is the Redis key of the free count.
func (s *Semaphore) Key() string { return s.key }

// Name is the logical name of the semaphore.
func (s *Semaphore) Name() string { return s.opts.Name }

// semaphoreChannel is Redisson's channel of a semaphore of either layout.
func semaphoreChannel(key string) string { return redisnames.Prefix("redisson_sc", key) }

// permitIDLen is the length of a permit id, stored raw: 16 bytes, as
// Redisson's. A lockgen permit id starts with the first PermitOwnerLen
// bytes of its Client's uuid (so lockgen inspect can find the owner label
// of a permit, which nothing else in Redis names) and ends with random
// bytes, which keep ids unique.
const permitIDLen = 16

// PermitOwnerLen is how many bytes of a lockgen permit id are the start of
// its Client's uuid (the rest are random).
const PermitOwnerLen = 8

// newPermitIDs returns n permit ids of the Client whose uuid starts with
// prefix, back to back.
func newPermitIDs(prefix *[PermitOwnerLen]byte, n int) []byte {
	ids := make([]byte, n*permitIDLen)
	_, _ = rand.Read(ids) // crypto/rand.Read never fails (Go 1.24+)
	for i := 0; i < len(ids); i += permitIDLen {
		copy(ids[i:i+PermitOwnerLen], prefix[:])
	}
	return ids
}

func (s *Semaphore) fail(op string, err error) error {
	return &LockError{Op: op, Name: s.opts.Name, Key: s.key, Err: err}
}

// Acquire waits until it holds n permits or ctx is done, with the
// Semaphore's lease. It returns the ctx of the hold; pass it to Release.
func (s *Semaphore) Acquire(ctx context.Context, n int) (context.Context, error) {
	return s.TryAcquire(ctx, n, Forever)
}

// TryAcquire waits up to wait (0: one try; Forever: until ctx is done)
// for n permits and holds them with the Semaphore's lease. It returns the
// ctx of the hold, or an error wrapping ErrNotAcquired, the ctx's error,
// ErrClosed or a Redis error.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait time.Duration) (context.Context, error) {
	lease := s.opts.Lease
	switch {
	case n < 1:
		return nil, s.fail("acquire", fmt.Errorf("%w: %d permits (acquire at least 1)", ErrInvalidArgument, n))
	case s.opts.Permits < 0:
		return nil, s.fail("acquire", fmt.Errorf("%w: negative Permits %d", ErrInvalidArgument, s.opts.Permits))
	}
	if err := mutex.Validate(s.key, lease); err != nil {
		return nil, s.fail("acquire", err)
	}
	if ctx.Err() != nil {
		return nil, s.fail("acquire", context.Cause(ctx))
	}
	c := s.c
	start := time.Now()
	ids := newPermitIDs(&c.idPrefix, n)
	a := holds.Args{Key: s.timeouts, Owner: c.env.NewOwner(), Field: string(ids)}
	marker := s.marker(string(ids))
	px := lease
	if px == Watchdog {
		px = c.opts.WatchdogTimeout
	}
	var sent time.Time
	try := func(ctx context.Context) (bool, time.Duration, error) {
		sent = time.Now()
		took, ttl, err := s.tryAcquire(ctx, a, marker, c.env.LeaseArg(px))
		if errors.Is(err, errTryAborted) {
			// Its marker now refuses every copy of this request: the
			// next try is a new request, with new permit ids.
			ids = newPermitIDs(&c.idPrefix, n)
			a.Field, marker = string(ids), s.marker(string(ids))
		}
		return took, ttl, err
	}
	w := await.Spec{
		Channel: s.channel,
		// A deleted counter (an operator's DEL, FLUSHALL) is a fresh
		// semaphore: its waiters try again at once (hub_track.go).
		Key:  s.key,
		Wait: wait,
		Wake: hub.WakeCount,
	}
	if err := c.env.Waits.Await(ctx, w, try); err != nil {
		err = s.fail("acquire", err)
		c.observe(Event{Kind: EventAcquireFailed, Name: s.opts.Name, Key: s.key, Lock: "semaphore", Ctx: ctx, Wait: time.Since(start), Err: err})
		return nil, err
	}
	hctx, err := c.env.AddHold(ctx, holds.Spec{Name: s.opts.Name, Key: s.key, Kind: "semaphore", Permit: true, From: (*semaphoreTaker)(s)}, a, lease, sent)
	if err != nil {
		// Closed while acquiring: give the permits back rather than leave them.
		_, _ = s.release(ctx, a, marker)
		return nil, s.fail("acquire", err)
	}
	c.observe(Event{Kind: EventAcquired, Name: s.opts.Name, Key: s.key, Lock: "semaphore", Owner: a.OwnerID(), Ctx: ctx, Wait: time.Since(start)})
	return hctx, nil
}

// tryAcquire runs the acquire script once. A reply lost to a transport
// error or a cancelled ctx is settled: the permits are either held (taken)
// or the attempt is marked aborted so that no copy of it takes them later.
// An attempt abandoned at its deadline (a client that does not honour
// deadlines on reads) resolves its late reply itself (late.go).
func (s *Semaphore) tryAcquire(ctx context.Context, a holds.Args, marker string, px any) (bool, time.Duration, error) {
	c := s.c
	ttl, err := scripts.SemaphoreAcquire.Run(ctx, c.env.RDB, 4, []any{
		3: s.key, s.timeouts, s.channel, marker,
		px, c.env.Publish, s.opts.Permits, a.Field,
	}).Int64()
	switch {
	case err == nil && ttl == 0:
		return true, 0, nil
	case err == nil && ttl == mutex.ReplyAborted:
		return false, 0, fmt.Errorf("%w: the attempt was settled as aborted", ErrNotAcquired)
	case err == nil:
		return false, time.Duration(ttl) * time.Millisecond, nil
	case scripts.IsReply(err), scripts.NotSent(err):
		return false, 0, err
	}
	if p := scripts.Abandoned(err); p != nil {
		s.resolveLate(p, a, marker) // gives back what a late reply took
		return false, 0, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	took, serr := c.env.Calls.Settle(ctx, func(ctx context.Context) (int64, error) {
		return scripts.SemaphoreSettle.Run(ctx, c.env.RDB, 2, []any{
			3: s.timeouts, marker,
			a.FieldID()[:permitIDLen], c.env.MarkerTTL,
		}).Int64()
	})
	if serr != nil {
		return false, 0, serr
	}
	if took == 1 {
		return true, 0, nil
	}
	return false, 0, fmt.Errorf("%w: %w", errTryAborted, err)
}

// errTryAborted: a try whose reply was lost was settled as not taken.
var errTryAborted = errors.New("the reply was lost and the attempt settled as not taken")

// Release gives back the permits of the acquisition that ctx carries. It
// runs detached from ctx's cancellation (with the Client's ReleaseTimeout),
// so it releases even when ctx is done. It returns an error wrapping
// ErrNotHeld when ctx carries no acquisition of this semaphore (or it was
// released already), and one wrapping ErrLockLost when the permits were
// lost (ran out, or deleted) before the release.
func (s *Semaphore) Release(ctx context.Context) error {
	acq := s.acquisitionOf(ctx)
	if acq == nil {
		return s.fail("release", fmt.Errorf("%w: ctx carries no acquisition of this semaphore", ErrNotHeld))
	}
	d, ok := s.c.env.Reg.Drop(acq)
	if !ok {
		return s.fail("release", fmt.Errorf("%w: already released", ErrNotHeld))
	}
	acq.End(context.Canceled) // before the release is sent (see Mutex.Unlock)
	if d.Lost != nil {
		return s.fail("release", d.Lost)
	}
	h := acq.Hold()
	freed, err := s.release(acq.Parent, h.Args, s.marker(h.Field))
	n := int64(len(h.Field) / permitIDLen)
	if err == nil && freed < n {
		err = fmt.Errorf("%w: %d of %d permits ran out or were deleted before the release", ErrLockLost, n-freed, n)
	}
	if err != nil {
		err = s.fail("release", err)
		s.c.env.Warn("release failed", "semaphore", s.opts.Name, "key", s.key, "err", err)
		return err
	}
	s.c.observe(Event{Kind: EventReleased, Name: s.opts.Name, Key: s.key, Lock: "semaphore", Owner: h.Owner, Ctx: ctx, Held: time.Since(acq.Start)})
	return nil
}

// acquisitionOf returns the innermost acquisition of this semaphore in
// ctx's chain, or nil.
func (s *Semaphore) acquisitionOf(ctx context.Context) *holds.Acquisition {
	for hc := s.c.env.Reg.Of(ctx); hc != nil; hc = hc.Parent() {
		if h := hc.Acquisition().Hold(); h.Permit && h.Key == s.key {
			return hc.Acquisition()
		}
	}
	return nil
}

// release runs the release script, resending it on transport errors (a
// resend finds the ids gone and changes nothing). It returns the number of
// permits freed.
func (s *Semaphore) release(ctx context.Context, a holds.Args, marker string) (int64, error) {
	return s.c.env.Calls.Retry(ctx, func(ctx context.Context) (int64, error) {
		return s.releaseOnce(ctx, s.c.env.RDB, a, marker)
	})
}

// releaseOnce runs the release script once, through via.
func (s *Semaphore) releaseOnce(ctx context.Context, via scripts.Runner, a holds.Args, marker string) (int64, error) {
	return scripts.SemaphoreRelease.Run(ctx, via, 4, []any{
		3: s.key, s.timeouts, s.channel, marker,
		s.c.env.Publish, a.Field, s.c.env.MarkerTTL,
	}).Int64()
}

// marker names the request marker of the acquisition of ids: one key per
// acquisition, in the semaphore's slot.
func (s *Semaphore) marker(ids string) string {
	return mutex.RequestMarker(s.key, hex.EncodeToString([]byte(ids[:permitIDLen])))
}

// Do acquires one permit with the Semaphore's options (waiting up to
// WaitTime), runs fn with the ctx of the hold, and releases the permit
// when fn returns or panics, even when ctx is cancelled meanwhile. It
// returns fn's error, joined with the release's (errors.Is(err,
// ErrLockLost) tells that fn ran, at least partly, without its permit).
func (s *Semaphore) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if fn == nil {
		return s.fail("acquire", fmt.Errorf("%w: nil fn", ErrInvalidArgument))
	}
	return do(ctx, permitLocker{s}, LockOptions{WaitTime: s.opts.WaitTime, Lease: s.opts.Lease}, fn)
}

// permitLocker is a Semaphore taking one permit, as do wants a lock.
type permitLocker struct{ s *Semaphore }

func (p permitLocker) TryLock(ctx context.Context, wait, _ time.Duration) (context.Context, error) {
	return p.s.TryAcquire(ctx, 1, wait)
}
func (p permitLocker) Unlock(ctx context.Context) error { return p.s.Release(ctx) }

// Available is the number of free permits, after the expired ones were
// reclaimed (0 when the semaphore was never set).
func (s *Semaphore) Available(ctx context.Context) (int, error) {
	n, err := s.drain(ctx, "read")
	if err != nil {
		return 0, s.fail("inspect", err)
	}
	return int(n), nil
}

// Drain takes every free permit at once and returns how many there were.
// The drained permits belong to no one: AddPermits gives them back.
func (s *Semaphore) Drain(ctx context.Context) (int, error) {
	n, err := s.drain(ctx, "drain")
	if err != nil {
		return 0, s.fail("drain", err)
	}
	return int(n), nil
}

func (s *Semaphore) drain(ctx context.Context, mode string) (int64, error) {
	return scripts.SemaphoreDrain.Run(ctx, s.c.env.RDB, 3, []any{
		3: s.key, s.timeouts, s.channel,
		s.c.env.Publish, mode,
	}).Int64()
}

// TrySetPermits sets the number of free permits to n only when the
// semaphore has none set (Redisson trySetPermits). It reports whether it
// did.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	return trySetPermits(ctx, s.c, s.key, s.channel, n, s.fail)
}

func trySetPermits(ctx context.Context, c *Client, key, channel string, n int, fail func(string, error) error) (bool, error) {
	if n < 0 {
		return false, fail("set-permits", fmt.Errorf("%w: negative permits %d", ErrInvalidArgument, n))
	}
	// Not resent by go-redis: a copy after a lost reply would find the
	// count this call set and report that it did not.
	set, err := scripts.SemaphoreTrySet.RunOnce(ctx, c.env.RDB, 2, []any{
		3: key, channel,
		n, c.env.Publish,
	}).Int64()
	if err != nil {
		return false, fail("set-permits", err)
	}
	return set == 1, nil
}

// SetPermits makes n the semaphore's total: the free count becomes n minus
// the permits held now (Redisson setPermits). Waiters are woken for the
// permits that came free.
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	if n < 0 {
		return s.fail("set-permits", fmt.Errorf("%w: negative permits %d", ErrInvalidArgument, n))
	}
	return s.add(ctx, "set", n)
}

// AddPermits adds n (which may be negative) to the free permits. Waiters
// are woken for the permits that came free. It is never sent twice: when
// its reply is lost it returns an error wrapping ErrOutcomeUnknown (the
// permits may or may not have been added).
func (s *Semaphore) AddPermits(ctx context.Context, n int) error { return s.add(ctx, "add", n) }

// add runs SemaphoreAdd. Setting the count is idempotent, adding to it is
// not: an add goes out once (RunOnce), and a lost reply is an unknown
// outcome rather than a copy that adds the permits twice.
func (s *Semaphore) add(ctx context.Context, mode string, n int) error {
	run := scripts.SemaphoreAdd.Run
	if mode == "add" {
		run = scripts.SemaphoreAdd.RunOnce
	}
	err := run(ctx, s.c.env.RDB, 3, []any{
		3: s.key, s.timeouts, s.channel,
		s.c.env.Publish, mode, n,
	}).Err()
	switch {
	case err == nil:
		return nil
	case mode == "add" && !scripts.IsReply(err) && !scripts.NotSent(err):
		err = fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return s.fail("set-permits", err)
}
