package calls

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/renew"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Limits bounds the calls that must finish after their caller gave up.
type Limits struct {
	Timeout time.Duration // Options.ReleaseTimeout
	Slots   *SlotMaps
	Gate    func(key string) *renew.Admission // the admission gate of key's node (nil: none): see Yield
}

// yieldFor bounds a release's Yield: short, since the lock it frees is
// held by no one meanwhile.
const yieldFor = 20 * time.Millisecond

// Yield holds a release of key back up to yieldFor while the watchdog's
// renewals to key's node run behind (its gate is closed): a flood of
// releases would take the CPU the renewals of the held locks need. The
// pause counts in the release's ReleaseTimeout (the ctx returned carries
// its bound).
func (k *Limits) Yield(ctx context.Context, key string) context.Context {
	if k.Gate == nil {
		return ctx
	}
	gate := k.Gate(key)
	if gate == nil || !gate.Closed() {
		return ctx
	}
	limit, until := k.Limit(ctx), time.Now().Add(yieldFor)
	if limit.Before(until) {
		until = limit
	}
	_ = gate.Wait(ctx, until, nil, nil)
	return scripts.WithCallBound(ctx, limit)
}

// Detached returns a ctx that survives the caller's cancellation and ends at Limit.
func (k *Limits) Detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return k.DetachedUntil(ctx, k.Limit(ctx))
}

// Limit is when detached work started now must end: after the release
// timeout, or at the call's bound (scripts.WithCallBound) if sooner.
func (k *Limits) Limit(ctx context.Context) time.Time {
	limit := time.Now().Add(k.Timeout)
	if b, ok := scripts.CallBoundOf(ctx); ok && b.Before(limit) {
		limit = b
	}
	return limit
}

// DetachedUntil is Detached, ending at limit, which is also the bound of
// its calls: a command on a client that does not honour ctx deadlines
// waits for its reply up to the call's bound (scripts.WithCallBound),
// which limit may come before.
func (k *Limits) DetachedUntil(ctx context.Context, limit time.Time) (context.Context, context.CancelFunc) {
	if b, ok := scripts.CallBoundOf(ctx); ok && limit.Before(b) {
		ctx = scripts.WithCallBound(ctx, limit) // (without a bound, its deadline is the limit)
	}
	if ctx.Done() == nil || ctx.Value(stayAttached{}) != nil {
		return context.WithDeadline(ctx, limit)
	}
	return context.WithDeadline(context.WithoutCancel(ctx), limit)
}

type stayAttached struct{}

// StayAttached marks ctx as one Detached does not detach: the Client's own
// background work ends with Close.
func StayAttached(ctx context.Context) context.Context {
	return context.WithValue(ctx, stayAttached{}, true)
}

// Retry runs the idempotent op on a Detached ctx, again while it fails
// without a reply or is refused before it ran (scripts.Refused: a slot
// half moved, a failover), until a reply or the limit
// (errs.OutcomeUnknown: with go-redis' own retries the last attempt may
// be in flight, and a settlement that never ran leaves the outcome it
// settles unknown). The first attempt is detached too: one cut short may
// still run in Redis, and a resend racing it would find its work done
// and report it lost.
func (k *Limits) Retry(ctx context.Context, op func(context.Context) (int64, error)) (int64, error) {
	ctx, cancel := k.Detached(ctx)
	defer cancel()
	o := k.attempts(ctx, op, resendable)
	if o.cut {
		return o.v, labelled(errs.OutcomeUnknown, o.err)
	}
	return o.v, o.err
}

// RetryRelease is Retry for a release, whose caller needs to know more
// than what the op settles. Cut by the limit after attempts that were all
// refused or never sent, it ends with errs.Unavailable: the release did
// not run, and may be sent again later. unanswered reports whether an
// attempt went without a reply: it may have run, so a resend that found
// nothing to free may have followed the copy that freed it.
func (k *Limits) RetryRelease(ctx context.Context, op func(context.Context) (int64, error)) (v int64, unanswered bool, err error) {
	ctx, cancel := k.Detached(ctx)
	defer cancel()
	o := k.attempts(ctx, op, resendable)
	if o.cut {
		label := errs.Unavailable
		if o.unanswered {
			label = errs.OutcomeUnknown
		}
		return o.v, o.unanswered, labelled(label, o.err)
	}
	return o.v, o.unanswered, o.err
}

// Unfinished reports whether err, from RetryRelease, ended a release at
// its limit with no reply that decided it (every attempt refused, never
// sent, or unanswered): Redis may still have what it was to free.
func Unfinished(err error) bool {
	return errors.Is(err, errs.Unavailable) || errors.Is(err, errs.OutcomeUnknown)
}

// ResendRefused runs op, which must not run twice (scripts.RunOnce), again
// while it is refused before it ran or was never sent, until the limit or
// ctx's end (it is not detached), then ends with errs.Unavailable. Any
// other outcome ends it, a lost reply too (errs.OutcomeUnknown: it may
// have run).
func (k *Limits) ResendRefused(ctx context.Context, op func(context.Context) error) error {
	ctx, cancel := context.WithDeadline(ctx, k.Limit(ctx))
	defer cancel()
	o := k.attempts(ctx, func(ctx context.Context) (int64, error) { return 0, op(ctx) }, notRun)
	if o.cut {
		return labelled(errs.Unavailable, o.err)
	}
	return o.err
}

// labelled is err, of attempts cut by their limit, wrapped with label,
// unless it has it already (scripts.RunOnce's errs.OutcomeUnknown).
func labelled(label, err error) error {
	if errors.Is(err, label) {
		return err
	}
	return fmt.Errorf("%w: %w", label, err)
}

// resendable says whether an idempotent op that failed with err is sent
// again: it got no reply, or was refused before it ran.
func resendable(err error) bool {
	return err != nil && (!scripts.IsReply(err) || scripts.Refused(err))
}

// notRun says whether an op that failed with err provably did not run.
func notRun(err error) bool { return scripts.Refused(err) || scripts.NotSent(err) }

// outcome is what the attempts of an op came to.
type outcome struct {
	v   int64
	err error // the last attempt's; when cut, why (see attempts)
	// unanswered: an attempt was sent and got no reply (it may have run).
	unanswered bool
	cut        bool // ctx ended while again still held
}

// attempts runs op until again(err) is false or ctx ends, backing off
// between attempts. When ctx ends first, the outcome's err is the last
// attempt sent that got no reply (it may have run), or else the last one
// sent (a refusal), or else the last.
func (k *Limits) attempts(ctx context.Context, op func(context.Context) (int64, error), again func(error) bool) outcome {
	backoff := 5 * time.Millisecond
	var o outcome
	for {
		v, err := op(ctx)
		o.v = v
		if !again(err) {
			o.err = err
			return o
		}
		switch sent := !scripts.NotSent(err); {
		case sent && !scripts.IsReply(err):
			o.err, o.unanswered = err, true
		case !o.unanswered && (sent || o.err == nil):
			o.err = err
		}
		k.Slots.Failed(err)
		select { // time.After's timer needs no Stop (Go 1.23)
		case <-ctx.Done():
			o.cut = true
			return o
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}
