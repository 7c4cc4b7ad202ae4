package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// Options configures a Client. The zero value is ready to use.
type Options struct {
	// WatchdogTimeout is the lease of holds that use the watchdog
	// (LockOptions.Lease == Watchdog). The watchdog renews them every
	// WatchdogTimeout/3. Zero means 30s, as in Redisson.
	WatchdogTimeout time.Duration

	// ReleaseTimeout bounds a release, which runs detached from the caller's
	// ctx (a cancelled caller never leaks a lock), and the settling of an
	// acquire whose reply was lost. Transport errors are retried within it.
	// Zero means 5s.
	ReleaseTimeout time.Duration

	// Logger receives lost locks and failed renewals and releases; each
	// kind of warning at most once per 10 s, the next one counting those
	// left out. Nil means slog.Default(), but only at Debug level: a
	// Client logs nothing unless asked to.
	// Nil means slog.Default().
	Logger *slog.Logger

	// Observer, when set, is told about acquisitions, waits, releases,
	// losses and watchdog rounds. Nil means no events.
	Observer Observer

	// Name, when set, names this Client in its owner label (label.go), so
	// lockgen inspect shows it beside the host and pid of a hold's owner.
	Name string

	// ReplicaTimeout bounds the WAIT of locks with SyncReplicas > 0.
	// Zero means 1s.
	ReplicaTimeout time.Duration

	// RedLockNodes are the independent Redis masters that RedLocks span
	// (the client passed to NewClient is not one of them unless listed).
	RedLockNodes []redis.UniversalClient

	// PubSub chooses how waiters are woken. PubSubAuto (the zero value)
	// uses sharded pub/sub (SSUBSCRIBE/SPUBLISH) on a Redis Cluster that
	// accepts PUBSUB SHARDNUMSUB (probed as Redisson does, the server
	// version only as a fallback), so an unlock is not broadcast to every
	// node, and classic pub/sub elsewhere. Every client of one lock must
	// use the same mode (as Redisson's subscription mode must match).
	PubSub PubSubMode

	// NoHandoff turns off hand-offs, so that every waiter takes the lock
	// with an acquire of its own after an unlock message, as Redisson's
	// do. By default a release hands the lock over in its own script call:
	// a reentrant lock's last release to the longest waiter of the same
	// Client when no other client is subscribed to the lock's channel on
	// its server (handoff.go), or to the longest lockgen waiter of any
	// Client when only lockgen Clients that queue their waiters are
	// (grant.go), a fair lock's to the head of the queue when it is a
	// lockgen waiter (fair.go). Turn the reentrant hand-off off
	// when Redisson clients that subscribe on replicas (subscriptionMode
	// SLAVE) wait for the same locks: Redis does not count them, so they
	// may wait up to 16 hand-offs for an unlock message.
	NoHandoff bool
}

// PubSubMode selects classic or sharded pub/sub; see Options.PubSub.
type PubSubMode uint8

const (
	// PubSubAuto: sharded on a Redis Cluster that has it, classic elsewhere.
	PubSubAuto PubSubMode = iota
	// PubSubClassic: SUBSCRIBE and PUBLISH.
	PubSubClassic
	// PubSubSharded: SSUBSCRIBE and SPUBLISH (Redis >= 7).
	PubSubSharded
)

const (
	defaultWatchdogTimeout = 30 * time.Second
	defaultReleaseTimeout  = 5 * time.Second
	// minLease is the shortest lease accepted: anything shorter expires
	// before a round trip and its drift margin.
	minLease = 10 * time.Millisecond
)

// Client is the shared runtime every lock handle works through: one per
// process and Redis deployment is the intended use. It owns one pub/sub
// connection (the hub that wakes waiters) and one watchdog loop that renews
// every watchdog hold in batched script calls.
//
// A Client is safe for concurrent use. Close it when done; the Redis client
// it was built from stays open and remains the caller's. The Client never
// changes that client (no hooks, no options): it sends commands through
// it and reads its pool statistics, and after Close nothing of the Client
// is reachable from it.
type Client struct {
	rdb       redis.UniversalClient
	opts      Options
	id        string               // uuid of this client: the first half of every owner token
	idArg     any                  // id, boxed once as a script argument
	idPrefix  [PermitOwnerLen]byte // the uuid's first bytes, raw: they start its permit ids
	cluster   bool                 // keys are grouped by slot for batched calls
	sharded   bool                 // sharded pub/sub: one subscription connection per slot
	publish   any                  // "publish" or "spublish", boxed once for script args
	markerTTL any                  // lifetime of request markers in ms, boxed once
	wdLease   any                  // WatchdogTimeout in ms, boxed once
	log       *slog.Logger
	warned    warnings // rate-limits repeated warnings (logging.go)

	ownerSeq   atomic.Uint64
	requestSeq atomic.Uint64
	// handoffRefused is set when the server refused the hand-off script
	// (an ACL without PUBSUB, a server that bars it in scripts): releases
	// publish from then on.
	handoffRefused atomic.Bool
	// grants spaces out the releases that publish rather than grant
	// across processes (grant.go).
	grants grantStreaks

	reg *holds.Registry // holds, turns and unknown outcomes (package holds)

	closeCh      chan struct{}
	drainCh      chan struct{} // closed when Shutdown begins (shutdown.go)
	drainOnce    sync.Once
	life         context.Context // cancelled by Close: ends renewals in flight
	endLife      context.CancelFunc
	hub          *hub.Hub
	wd           watchdog
	label        ownerLabel      // who this client is, for lockgen inspect (label.go)
	closeRenewal func() error    // closes the watchdog's own client, if any
	slots        *slotMaps       // re-reads the cluster's slot maps after a failure (failover.go)
	settler      *settle.Settler // background settlements (package settle)
	redNodes     []*Client       // one client per RedLock node
}

// NewClient returns a Client that locks through rdb, which may be a
// *redis.Client, a Sentinel failover client or a *redis.ClusterClient. A
// *redis.Ring is refused: it shards keys by its own hash, not by cluster
// slot, so the keys of one lock, of one watchdog batch or of one multi-lock
// script could land on different servers.
func NewClient(rdb redis.UniversalClient, opts *Options) (*Client, error) {
	if rdb == nil {
		return nil, fmt.Errorf("lockgen: NewClient: %w: nil redis client", ErrInvalidArgument)
	}
	if _, ok := rdb.(*redis.Ring); ok {
		return nil, fmt.Errorf("lockgen: NewClient: %w: a *redis.Ring shards keys without cluster slots (use one server, Sentinel or Redis Cluster)", ErrInvalidArgument)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.WatchdogTimeout == 0 {
		o.WatchdogTimeout = defaultWatchdogTimeout
	}
	if o.WatchdogTimeout < 3*minLease {
		return nil, fmt.Errorf("lockgen: NewClient: %w: WatchdogTimeout %v is shorter than %v", ErrInvalidLease, o.WatchdogTimeout, 3*minLease)
	}
	if o.ReleaseTimeout == 0 {
		o.ReleaseTimeout = defaultReleaseTimeout
	}
	if o.ReleaseTimeout < 0 {
		return nil, fmt.Errorf("lockgen: NewClient: %w: negative ReleaseTimeout %v", ErrInvalidArgument, o.ReleaseTimeout)
	}
	if o.ReplicaTimeout <= 0 {
		o.ReplicaTimeout = time.Second
	}
	c := &Client{
		rdb:       rdb,
		opts:      o,
		id:        newUUID(),
		publish:   "publish",
		markerTTL: strconv.FormatInt(max(10*time.Second, 2*o.ReleaseTimeout).Milliseconds(), 10),
		log:       newLogger(o.Logger),
		closeCh:   make(chan struct{}),
		drainCh:   make(chan struct{}),
	}
	c.idArg = c.id
	_, _ = hex.Decode(c.idPrefix[:], []byte(strings.ReplaceAll(c.id, "-", "")[:2*PermitOwnerLen]))
	c.grants.seed = maphash.MakeSeed()
	c.label.init(c.id, o.Name, time.Now())
	c.life, c.endLife = context.WithCancel(context.Background())
	c.wdLease = strconv.FormatInt(o.WatchdogTimeout.Milliseconds(), 10)
	_, c.cluster = rdb.(*redis.ClusterClient)
	c.reg = c.newRegistry()
	// A renewal must end by the deadline it serves: it goes through a
	// client that honours ctx deadlines (control.go).
	renewal, closeRenewal, bounded := deadlineClient(rdb, renewWorkers+1)
	c.slots = newSlotMaps(c.closeCh, rdb, renewal)
	c.settler = c.newSettler()
	c.sharded = c.choosePubSub(o.PubSub)
	if c.sharded {
		c.publish = "spublish"
	}
	c.hub = hub.New(hub.Config{Client: rdb, Sharded: c.sharded, Log: c.log, Failed: c.slots.failed})
	if !bounded {
		if err := checkUnbounded(rdb, o.WatchdogTimeout); err != nil {
			return nil, fmt.Errorf("lockgen: NewClient: %w", err)
		}
		c.log.Warn("the Redis client does not honour ctx deadlines (ContextTimeoutEnabled is off) and lockgen cannot rebuild it: " +
			"a renewal on a dead connection is bounded only by the client's timeouts and retries; hold deadlines are still enforced on time")
	}
	c.closeRenewal = closeRenewal
	c.wd.init(c, renewal)
	for _, node := range o.RedLockNodes {
		sub := o
		sub.RedLockNodes, sub.Observer = nil, nil
		n, err := NewClient(node, &sub)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		n.label.id = c.id // its holds carry this client's owner tokens
		c.redNodes = append(c.redNodes, n)
	}
	return c, nil
}

// newSettler makes the settler of c (package settle). Its jobs' calls go
// through the watchdog's client, which honours ctx deadlines (control.go),
// each bounded by a second at most: a call stuck on a dead connection ends
// there rather than after go-redis' read timeouts and retries, so the work
// resumes soon after Redis answers again, and Close does not wait on a
// socket. Its ctx stays attached (see detached): Close ends it.
func (c *Client) newSettler() *settle.Settler {
	return settle.New(settle.Config{
		Life:   context.WithValue(c.life, stayAttached{}, true),
		Try:    min(c.opts.ReleaseTimeout, time.Second),
		Failed: c.slots.reload,
	})
}

// ID is the uuid that starts every owner token of this client.
func (c *Client) ID() string { return c.id }

// Close stops the watchdog and the pub/sub hub. Waiters return ErrClosed;
// the ctx of every hold is cancelled with a cause wrapping ErrClosed, since
// no one renews it any more. Holds stay in Redis until their holders
// Unlock (which still works after Close) or their lease runs out. Close
// does not close the Redis client, which belongs to the caller.
func (c *Client) Close() error {
	if !c.reg.Close(func(h *hold) error { return &LockError{Op: "renew", Name: h.Name, Key: h.Key, Err: ErrClosed} }) {
		return nil
	}
	close(c.closeCh)
	c.endLife() // every hold's ctx is already cancelled: renewals are moot
	c.settler.Close()
	c.wd.wait()
	if c.closeRenewal != nil {
		_ = c.closeRenewal()
	}
	c.wd.waitJobs()
	c.hub.Close()
	for _, n := range c.redNodes {
		_ = n.Close()
	}
	return nil
}

func (c *Client) isClosed() bool {
	select {
	case <-c.closeCh:
		return true
	default:
		return false
	}
}

// newOwner returns a new owner token "<client uuid>:<n>", Redisson's
// "<uuid>:<thread id>" with a ctx chain in place of the thread.
func (c *Client) newOwner() string {
	var b [64]byte
	return string(strconv.AppendUint(append(append(b[:0], c.id...), ':'), c.ownerSeq.Add(1), 10))
}

// newRequestID returns an id unique to one acquire attempt.
func (c *Client) newRequestID() string {
	var b [64]byte
	return string(strconv.AppendUint(append(append(b[:0], c.id...), ":r"...), c.requestSeq.Add(1), 36))
}

func (c *Client) observe(e Event) {
	if c.opts.Observer != nil {
		c.opts.Observer.ObserveLock(e)
	}
}

// leaseArg is lease in milliseconds as a script argument.
func (c *Client) leaseArg(lease time.Duration) any {
	if lease == c.opts.WatchdogTimeout {
		return c.wdLease
	}
	return strconv.FormatInt(lease.Milliseconds(), 10)
}

// detached returns a ctx that survives the caller's cancellation and ends
// after the release timeout: releases and settlements must finish even when
// the caller has given up.
//
// Within a call with a wait time (see callBound) it ends at the call's
// bound instead, if that comes first: what is left over then is settled
// in the background.
func (c *Client) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return c.detachedUntil(ctx, c.releaseLimit(ctx))
}

// releaseLimit is when detached work started now must end: after the
// release timeout, or at the call's bound (callBound) if sooner.
func (c *Client) releaseLimit(ctx context.Context) time.Time {
	limit := time.Now().Add(c.opts.ReleaseTimeout)
	if b, ok := ctx.Value(callBound{}).(time.Time); ok && b.Before(limit) {
		limit = b
	}
	return limit
}

// detachedUntil is detached, ending at limit.
func (c *Client) detachedUntil(ctx context.Context, limit time.Time) (context.Context, context.CancelFunc) {
	if ctx.Value(stayAttached{}) != nil {
		return context.WithDeadline(ctx, limit)
	}
	return context.WithDeadline(context.WithoutCancel(ctx), limit)
}

// callBound, as a ctx value, is the time by which the call a try belongs
// to must return (await): detached work within the try ends there too.
type callBound struct{}

// stayAttached, as a ctx value, keeps detached from detaching: the
// Client's own background work (package settle) ends with Close.
type stayAttached struct{}

// retry runs op on ctx and, if that fails without a reply from Redis (a
// transport error, or ctx cancelled), again on a ctx detached from ctx's
// cancellation with the release timeout, until it succeeds, Redis replies
// with an error (which a resend would not change), or the timeout ends.
// op must be idempotent.
//
// The first attempt ends by the same limit as the rest: a call stuck on a
// dead connection is not waited out past it.
func (c *Client) retry(ctx context.Context, op func(context.Context) (int64, error)) (int64, error) {
	limit := c.releaseLimit(ctx)
	fctx, cancel := context.WithDeadline(ctx, limit)
	v, err := op(fctx)
	cancel()
	if err == nil || scripts.IsReply(err) {
		return v, err
	}
	c.slots.failed(err)
	dctx, cancel := c.detachedUntil(ctx, limit)
	defer cancel()
	return c.retryDetached(dctx, op)
}

// retryDetached runs op until it succeeds, Redis replies with an error, or
// ctx ends (ErrOutcomeUnknown). A failure without a reply has the slot
// maps re-read before the next attempt (failover.go).
func (c *Client) retryDetached(ctx context.Context, op func(context.Context) (int64, error)) (int64, error) {
	backoff := 5 * time.Millisecond
	for {
		v, err := op(ctx)
		if err == nil || scripts.IsReply(err) {
			return v, err
		}
		c.slots.failed(err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		case <-t.C:
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
