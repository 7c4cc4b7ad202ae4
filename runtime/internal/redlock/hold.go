package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
)

// hold is one acquisition of a RedLock: its parts, each a hold in its
// node Client's registry, which renews it and ends it when it is lost.
type hold struct {
	owner    string
	start    time.Time
	parts    []context.Context // the hold's ctx on each node; nil where not taken
	spare    int32             // parts that may be lost before the quorum is
	lost     atomic.Int32
	released atomic.Bool
	cancel   context.CancelCauseFunc
}

// holdKey is the ctx key of a RedLock's hold: its Client and key.
type holdKey struct {
	env *lockenv.Env
	key string
}

func (l *Lock) holdIn(ctx context.Context) *hold {
	h, _ := ctx.Value(holdKey{l.env, l.key}).(*hold)
	return h
}

// hold makes the ctx of a granted acquisition. It is cancelled with
// errs.LockLost once more parts are lost than the quorum can spare, or
// (fixed lease) when the validity ends, and with errs.Closed when a node's
// Client closes.
func (l *Lock) hold(ctx context.Context, owner string, parts []context.Context, granted int, lease time.Duration, validUntil time.Time) context.Context {
	h := &hold{owner: owner, start: time.Now(), parts: parts, spare: int32(granted - l.quorum)}
	cctx, cancel := context.WithCancelCause(ctx)
	h.cancel = cancel
	var out context.Context = cctx
	if lease != lockenv.Watchdog {
		dctx, stop := context.WithDeadlineCause(cctx, validUntil, l.fail("lease", fmt.Errorf("%w: validity of the fixed lease ran out", errs.LockLost)))
		out = dctx
		h.cancel = func(err error) { cancel(err); stop() }
	}
	for _, p := range parts {
		if p != nil {
			// A part ends when it is released too (cause context.Canceled):
			// by then the hold's ctx is done, and its first cause stays.
			context.AfterFunc(p, func() { l.partEnded(h, context.Cause(p)) })
		}
	}
	return context.WithValue(out, holdKey{l.env, l.key}, h)
}

// partEnded ends h when a part's end (cause) makes it lost.
func (l *Lock) partEnded(h *hold, cause error) {
	switch {
	case errors.Is(cause, errs.Closed):
		h.cancel(l.fail("renew", errs.Closed))
	case errors.Is(cause, errs.LockLost) && h.lost.Add(1) > h.spare:
		h.cancel(l.fail("renew", fmt.Errorf("%w: fewer than %d nodes still hold it", errs.LockLost, l.quorum)))
	}
}

// Release releases the acquisition ctx carries on every node, and returns
// its owner and start; with an error wrapping errs.LockLost when fewer
// than a quorum of nodes still held it. The hold's ctx is done before the
// releases are sent.
func (l *Lock) Release(ctx context.Context) (owner string, start time.Time, _ error) {
	h := l.holdIn(ctx)
	if h == nil {
		return "", time.Time{}, l.fail("release", fmt.Errorf("%w: ctx carries no acquisition of this lock", errs.NotHeld))
	}
	if h.released.Swap(true) {
		return "", time.Time{}, l.fail("release", fmt.Errorf("%w: already released", errs.NotHeld))
	}
	lost := h.lost.Load() > h.spare
	h.cancel(context.Canceled)
	l.releaseParts(h.parts)
	if lost {
		return h.owner, h.start, l.fail("release", fmt.Errorf("%w: fewer than %d nodes held it", errs.LockLost, l.quorum))
	}
	return h.owner, h.start, nil
}
