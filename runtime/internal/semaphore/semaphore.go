package semaphore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/calls"
	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// Sem is the engine of one semaphore handle: one key on one Client.
type Sem struct {
	counter
	timeouts string
	permits  int // what a fresh semaphore starts with (0: none set)
}

// Init makes s the semaphore at key, named name, starting with permits when its count is absent.
func (s *Sem) Init(env *lockenv.Env, key, name string, permits int) {
	*s = Sem{counter: counter{env: env, key: key, name: name, channel: channelName(key)}, timeouts: redisnames.Suffix(key, "timeout"), permits: permits}
}

// channelName is Redisson's channel of a semaphore of either layout.
func channelName(key string) string { return redisnames.Prefix("redisson_sc", key) }

const permitIDLen = 16 // of a raw permit id, as Redisson's (see newIDs)

// Acquiring is one acquisition of n permits in progress; once taken, Record records the hold.
type Acquiring struct {
	s      *Sem
	ctx    context.Context
	n      int
	a      holds.Args
	marker string
	lease  time.Duration
	px     any // the lease as a script argument
	sent   time.Time
}

// Acquire waits up to wait (0: one try; < 0: until ctx is done) for n permits held with lease.
func (s *Sem) Acquire(ctx context.Context, n int, wait, lease time.Duration) (*Acquiring, error) {
	c := s.env
	c.Acquiring.Add(1)
	defer c.Acquiring.Add(-1)
	px := lease
	if px == lockenv.Watchdog {
		px = c.Watchdog
	}
	w := &Acquiring{s: s, ctx: ctx, n: n, a: holds.Args{Key: s.timeouts, Owner: c.NewOwner()}, lease: lease, px: c.LeaseArg(px)}
	w.newIDs()
	// Key: a deleted counter is a fresh semaphore, whose waiters try again.
	spec := await.Spec{Channel: s.channel, Key: s.key, Wait: wait, Wake: hub.WakeCount, Need: n}
	if err := c.Waits.Await(ctx, spec, w.try); err != nil {
		return nil, s.fail("acquire", err)
	}
	return w, nil
}

// Owner is the acquisition's owner token.
func (w *Acquiring) Owner() string { return w.a.OwnerID() }

// Record records the hold of the permits taken and returns its ctx.
func (w *Acquiring) Record() (context.Context, error) {
	s := w.s
	hctx, err := s.env.AddHold(w.ctx, holds.Spec{Name: s.name, Key: s.key, Kind: "semaphore", Permit: true, From: (*taker)(s)}, w.a, w.lease, w.sent)
	if err != nil {
		// Closed while acquiring: give the permits back rather than leave them.
		_, _, _ = s.release(w.ctx, w.a)
		return nil, s.fail("acquire", err)
	}
	return hctx, nil
}

// try runs the acquire script once. A lost reply is settled: the permits
// are held, or the attempt is marked aborted so no copy of it takes them,
// and the next try is a new request with new ids. One abandoned at its
// deadline resolves its late reply itself (resolveLate).
func (w *Acquiring) try(ctx context.Context) (bool, time.Duration, error) {
	s, c, a, marker := w.s, w.s.env, w.a, w.marker
	w.sent = time.Now()
	ttl, err := scripts.SemaphoreAcquire.Run(ctx, c.RDB, 4, []any{
		3: s.key, s.timeouts, s.channel, marker,
		w.px, c.Publish, s.permits, a.Field,
	}).Int64()
	switch {
	case err == nil && ttl == 0:
		return true, 0, nil
	case err == nil && ttl == replyAborted:
		return false, 0, fmt.Errorf("%w: the attempt was settled as aborted", errs.NotAcquired)
	case err == nil:
		return false, time.Duration(ttl) * time.Millisecond, nil
	case scripts.IsReply(err), scripts.NotSent(err):
		return false, 0, err
	}
	if p := scripts.Abandoned(err); p != nil {
		s.resolveLate(p, a) // gives back what a late reply took
		return false, 0, fmt.Errorf("%w: %w", errs.OutcomeUnknown, err)
	}
	took, serr := c.Calls.Retry(ctx, func(ctx context.Context) (int64, error) {
		return scripts.SemaphoreSettle.Run(ctx, c.RDB, 2, []any{
			3: s.timeouts, marker,
			a.FieldID()[:permitIDLen], c.MarkerTTL,
		}).Int64()
	})
	if serr != nil {
		return false, 0, serr
	}
	if took == 1 {
		return true, 0, nil
	}
	w.newIDs()
	return false, 0, fmt.Errorf("the reply was lost and the attempt settled as not taken: %w", err)
}

// newIDs makes the acquisition a new request, with new permit ids: the
// first lockenv.PermitOwnerLen bytes of each are the Client's uuid's (so
// lockgen inspect can find a permit's owner), the rest random.
func (w *Acquiring) newIDs() {
	ids := make([]byte, w.n*permitIDLen)
	_, _ = rand.Read(ids) // crypto/rand.Read never fails (Go 1.24+)
	for i := 0; i < len(ids); i += permitIDLen {
		copy(ids[i:], w.s.env.IDPrefix[:])
	}
	w.a.Field = string(ids)
	w.marker = w.s.marker(w.a.FieldID())
}

const replyAborted = -3 // semaphore_acquire.lua: a copy of an aborted request

// Release gives back the permits of the acquisition ctx carries, and
// returns its owner and start: with an error too when the hold ended here
// (the release failed, or found the permits gone: errs.LockLost), not
// when it had ended before (lost, released: owner "").
func (s *Sem) Release(ctx context.Context) (owner string, start time.Time, _ error) {
	var acq *holds.Acquisition // the innermost of this semaphore in ctx's chain
	for hc := s.env.Reg.Of(ctx); hc != nil && acq == nil; hc = hc.Parent() {
		if h := hc.Acquisition().Hold(); h.Permit && h.Key == s.key {
			acq = hc.Acquisition()
		}
	}
	if acq == nil {
		return "", time.Time{}, s.fail("release", fmt.Errorf("%w: ctx carries no acquisition of this semaphore", errs.NotHeld))
	}
	// DropLost ends the hold's ctx before the release is sent.
	if err := s.env.DropLost(acq); err != nil {
		return "", time.Time{}, s.fail("release", err)
	}
	h := acq.Hold()
	rel := s.env.Calls.Yield(acq.Parent, s.key)
	sent := time.Now()
	freed, unanswered, err := s.release(rel, h.Args)
	if calls.Unfinished(err) {
		// Redis refused it or did not answer: the permits are given back
		// once it does, rather than held until their lease runs out.
		s.giveBack(h.Args, time.Until(h.Deadline())+s.env.GiveBackFor())
	}
	if n := int64(len(h.Field) / permitIDLen); err == nil && freed < n {
		err = unfreed(n-freed, n, unanswered && sent.Before(h.Deadline()))
	}
	if err != nil {
		err = s.fail("release", err)
		s.env.Warn("release failed", "semaphore", s.name, "key", s.key, "err", err)
	}
	return h.Owner, acq.Start, err
}

// release runs the release script, resent on transport errors (a resend
// finds the ids gone), and returns the number of permits freed and
// whether an attempt got no reply (calls.Limits.RetryRelease).
func (s *Sem) release(ctx context.Context, a holds.Args) (int64, bool, error) {
	return s.env.Calls.RetryRelease(ctx, func(ctx context.Context) (int64, error) {
		return s.releaseOnce(ctx, s.env.RDB, a)
	})
}

// unfreed is the error of a release that freed missing of the n permits
// of a hold. After an attempt that got no reply, sent before the hold's
// deadline (resentInTime), a resend finds gone what that attempt freed:
// the permits may have been held until then, an unknown outcome. Else
// they ran out or were deleted before: lost.
func unfreed(missing, n int64, resentInTime bool) error {
	if resentInTime {
		return fmt.Errorf("%w: the release got no reply and its resend found %d of %d permits gone (the first copy may have freed them)", errs.OutcomeUnknown, missing, n)
	}
	return fmt.Errorf("%w: %d of %d permits ran out or were deleted before the release", errs.LockLost, missing, n)
}

// releaseOnce runs the release script once, without go-redis' resends
// (RunOnce): its callers resend it, and see every attempt without a reply.
func (s *Sem) releaseOnce(ctx context.Context, via scripts.Runner, a holds.Args) (int64, error) {
	return scripts.SemaphoreRelease.RunOnce(ctx, via, 4, []any{
		3: s.key, s.timeouts, s.channel, s.marker(a.FieldID()),
		s.env.Publish, a.Field, s.env.MarkerTTL,
	}).Int64()
}

// marker names the request marker of the acquisition of ids, in the semaphore's slot.
func (s *Sem) marker(ids string) string {
	return lockenv.RequestMarker(s.key, hex.EncodeToString([]byte(ids[:permitIDLen])))
}

// Available is the number of free permits, after the expired ones were
// reclaimed (0 when the semaphore was never set).
func (s *Sem) Available(ctx context.Context) (int, error) {
	n, err := s.change(ctx, scripts.SemaphoreDrain, false, "read")
	return int(n), s.fail("inspect", err)
}

// Drain takes every free permit at once and returns how many there were.
// It is sent once: a resent copy would find no free permit and report 0,
// the permits the first took lost.
func (s *Sem) Drain(ctx context.Context) (int, error) {
	n, err := s.change(ctx, scripts.SemaphoreDrain, true, "drain")
	return int(n), s.fail("drain", err)
}

// SetPermits makes n the semaphore's total: the free count becomes n minus
// the permits held now (Redisson setPermits). Waiters are woken for the
// permits that came free.
func (s *Sem) SetPermits(ctx context.Context, n int) error {
	if n < 0 {
		return s.fail("set-permits", fmt.Errorf("%w: negative permits %d", errs.InvalidArgument, n))
	}
	_, err := s.change(ctx, scripts.SemaphoreAdd, false, "set", n)
	return s.fail("set-permits", err)
}

// AddPermits adds n (which may be negative) to the free permits, waking
// waiters for those that came free. It is sent once: a lost reply is
// errs.OutcomeUnknown.
func (s *Sem) AddPermits(ctx context.Context, n int) error {
	_, err := s.change(ctx, scripts.SemaphoreAdd, true, "add", n)
	return s.fail("set-permits", err)
}

// change runs sc on the semaphore's keys with args after Publish: when
// once, sent once (scripts.RunOnce: a lost reply is an unknown outcome).
func (s *Sem) change(ctx context.Context, sc scripts.Script, once bool, args ...any) (int64, error) {
	run := sc.Run
	if once {
		run = sc.RunOnce
	}
	n, err := run(ctx, s.env.RDB, 3, append([]any{3: s.key, s.timeouts, s.channel, s.env.Publish}, args...)).Int64()
	if err != nil {
		return 0, err // as counter.count: no number beside an error
	}
	return n, nil
}

// taker is a Sem as the registry sees it (holds.Taker).
type taker Sem

// ExtraKeys: none, renew_batch.lua finds the permit ids in the hold's field.
func (*taker) ExtraKeys(*holds.Hold) []string { return nil }

// GiveBackLost releases the permit ids of h, lost at its deadline.
func (t *taker) GiveBackLost(h *holds.Hold) { (*Sem)(t).giveBack(h.Args, t.env.GiveBackFor()) }

// giveBack releases the permit ids of a in the background (package
// settle), through the client that honours deadlines, until Redis answers
// without an error (READONLY, LOADING in a failover are tried again), for
// up to within (by then Redis has expired them).
func (s *Sem) giveBack(a holds.Args, within time.Duration) {
	s.env.Settler.Add(settle.Job{
		Try: func(ctx context.Context) bool {
			_, err := s.releaseOnce(ctx, s.env.Renewal, a)
			return err == nil
		},
		Until: time.Now().Add(within),
	})
}

// resolveLate takes over an acquire attempt its caller abandoned (see
// lockenv.Replied): permits the late reply took are given back, and so
// are they when no reply comes: the release marks the request done, so
// no copy on its way takes them later.
func (s *Sem) resolveLate(p *scripts.Pending, a holds.Args) {
	s.env.Then(p, func(cmd *redis.Cmd) {
		if ttl, err := cmd.Int64(); !lockenv.Replied(err) || err == nil && ttl == 0 {
			s.giveBack(a, s.env.GiveBackFor())
		}
	})
}
