package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/calls"
	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/mutex"
	"github.com/lockgen/lockgen/runtime/internal/redlock"
	"github.com/lockgen/lockgen/runtime/internal/settle"
	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

const (
	defaultWatchdogTimeout = 30 * time.Second
	defaultReleaseTimeout  = 5 * time.Second
	// minLease is the shortest lease accepted: anything shorter expires
	// before a round trip and its drift margin.
	minLease = lockenv.MinLease
)

// Client is the shared runtime every lock handle works through: one per
// process and Redis deployment is the intended use. It owns one pub/sub
// connection per server (per master on a Redis Cluster with sharded
// pub/sub: the hub that wakes waiters) and one watchdog loop that renews
// every watchdog hold in batched script calls (docs/scale-out.md counts
// its connections).
//
// A Client is safe for concurrent use. Close it when done; the Redis client
// it was built from stays open and remains the caller's. The Client never
// changes that client (no hooks, no options): it sends commands through
// it and reads its pool statistics, and after Close nothing of the Client
// is reachable from it.
type Client struct {
	// env is what every lock of the Client works through (package
	// lockenv): the Redis clients, the hold registry, the hub, the wait
	// loop, the call limits, the settler and the owner tokens' ids.
	env *lockenv.Env
	// mutexes is env with the state the Mutex engine keeps per Client
	// (package mutex): its Locks work through it.
	mutexes *mutex.Env
	opts    Options

	closeCh      chan struct{}
	drainCh      chan struct{} // closed when Shutdown begins
	drainOnce    sync.Once
	life         context.Context // cancelled by Close: ends renewals in flight
	endLife      context.CancelFunc
	wd           *watchdog.Watchdog // renews watchdog holds (package watchdog)
	closeRenewal func() error       // closes the watchdog's own client, if any
	slots        *calls.SlotMaps    // re-reads the cluster's slot maps after a failure (package calls)
	redNodes     []*Client          // one client per RedLock node
	redHolds     redlock.Holds      // the RedLock holds over them, cut first by Shutdown
}

// NewClient returns a Client that locks through rdb, which may be a
// *redis.Client, a Sentinel failover client or a *redis.ClusterClient. A
// *redis.Ring is refused: it shards keys by its own hash, not by cluster
// slot, so the keys of one lock, of one watchdog batch or of one multi-lock
// script could land on different servers.
func NewClient(rdb redis.UniversalClient, opts *Options) (*Client, error) {
	return newClient(rdb, opts, "")
}

// newClient is NewClient for a Client whose owner tokens carry labelID
// ("": its own uuid): a RedLock node's carry its parent's.
func newClient(rdb redis.UniversalClient, opts *Options, labelID string) (*Client, error) {
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
	c := &Client{opts: o, closeCh: make(chan struct{}), drainCh: make(chan struct{})}
	c.env = &lockenv.Env{
		RDB: rdb, ID: newUUID(), Publish: "publish", Log: newLogger(o.Logger),
		MarkerTTL: strconv.FormatInt(max(10*time.Second, 2*o.ReleaseTimeout).Milliseconds(), 10),
		Watchdog:  o.WatchdogTimeout, Replicas: o.ReplicaTimeout, NoHandoff: o.NoHandoff,
		Fail: fail, WaitStarted: waitStarted(o.Observer),
	}
	env := c.env
	env.IDArg = env.ID
	_, env.Cluster = rdb.(*redis.ClusterClient)
	// A renewal must end by the deadline it serves: it goes through a
	// client that honours ctx deadlines (package watchdog), as the pub/sub
	// flavour's probe does, which must not outlive its bound.
	renewal, closeRenewal, bounded := watchdog.DeadlineClient(rdb, watchdog.Workers+1)
	sharded, err := hub.ChooseSharded(renewal, env.Cluster, o.PubSub.forced(), env.Log)
	if err != nil {
		if closeRenewal != nil {
			_ = closeRenewal()
		}
		return nil, fmt.Errorf("lockgen: NewClient: %w", err)
	}
	if env.Sharded = sharded; sharded {
		env.Publish = "spublish"
	}
	env.Init()
	c.mutexes = mutex.NewEnv(env)
	_, _ = hex.Decode(env.IDPrefix[:], []byte(strings.ReplaceAll(env.ID, "-", "")[:2*PermitOwnerLen]))
	c.life, c.endLife = context.WithCancel(context.Background())
	env.Reg = c.newRegistry()
	env.Renewal = renewal
	c.slots = calls.NewSlotMaps(c.closeCh, rdb, renewal)
	env.Calls = calls.Limits{Timeout: o.ReleaseTimeout, Slots: c.slots}
	env.Settler = c.newSettler()
	env.Hub = hub.New(hub.Config{Client: rdb, Sharded: env.Sharded, Log: env.Log, Slots: c.slots})
	if !bounded {
		if err := watchdog.CheckUnbounded(rdb, o.WatchdogTimeout); err != nil {
			return nil, fmt.Errorf("lockgen: NewClient: %w", err)
		}
		env.Log.Warn("the Redis client does not honour ctx deadlines (ContextTimeoutEnabled is off) and lockgen cannot rebuild it: " +
			"a renewal on a dead connection is bounded only by the client's timeouts and retries; hold deadlines are still enforced on time")
	}
	c.closeRenewal = closeRenewal
	if labelID == "" {
		labelID = env.ID
	}
	c.wd = c.newWatchdog(renewal, ownerLabel(labelID, o.Name, time.Now()))
	env.Calls.Gate = c.wd.Gate
	env.Waits = c.newWaitLoop()
	if err := c.addRedNodes(o); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// addRedNodes makes a Client for each RedLock node of o, whose holds
// carry c's owner tokens.
func (c *Client) addRedNodes(o Options) error {
	for _, node := range o.RedLockNodes {
		sub := o
		sub.RedLockNodes, sub.Observer = nil, nil
		n, err := newClient(node, &sub, c.env.ID)
		if err != nil {
			return err
		}
		// A node's tries under a hold of c (a RedLock taken by running
		// work) are running work too.
		n.env.Waits.Running = func(ctx context.Context) bool { return n.running(ctx) || c.running(ctx) }
		c.redNodes = append(c.redNodes, n)
	}
	return nil
}

// running reports whether ctx carries a hold of c: a lock's, or a
// RedLock's (whose parts are held by the node Clients).
func (c *Client) running(ctx context.Context) bool {
	hc := c.env.Reg.Of(ctx)
	if hc != nil && ctx.Value(inOrderKey{}) == hc {
		return false // a multi-lock's next member, under its first members' hold only
	}
	return hc != nil || redlock.Running(ctx, c.env)
}

// inOrderKey marks the ctx a non-atomic multi-lock's next member waits
// under (its value: the hold of the members taken so far): that hold is
// the acquisition's own, not running work (unless the multi-lock was taken
// under running work: then there is no mark).
type inOrderKey struct{}

// newWaitLoop makes the wait loop of c (package await).
func (c *Client) newWaitLoop() await.Loop {
	return await.Loop{
		Hub: c.env.Hub, SingleTry: c.opts.ReleaseTimeout, Closed: c.closeCh, Draining: c.drainCh,
		Running: c.running,
		Failed:  c.slots.Failed,
		// A Client that waits is named in Redis (its owner label: the
		// watchdog loop writes it), so lockgen inspect can tell whose
		// waiters these are before it holds anything.
		Sleeping: c.wd.Start,
		Gate:     c.wd.Gate,
	}
}

// newRegistry makes the registry of c.
func (c *Client) newRegistry() *holds.Registry {
	return holds.New(holds.Config{
		Watchdog: c.opts.WatchdogTimeout,
		Cluster:  c.env.Cluster,
		Started:  func() { c.wd.Start() }, // c.wd is made after the registry
		Lost: func(h *holds.Hold, cause error) {
			c.env.Warn("lock lost", "lock", h.Name, "key", h.Key, "cause", cause)
			if g := h.Group; g != nil {
				// A member of an atomic multi-lock, reported as it, once.
				if e := (holds.Event{Owner: h.Owner, Deadline: h.DeadlineLocked(), Cause: cause}); g.Lost(e) {
					c.observeGroupLoss(g, e)
				}
				return
			}
			c.observe(Event{Kind: EventLost, Name: h.Name, Key: h.Key, Lock: h.Kind, Owner: h.Owner, Deadline: h.DeadlineLocked(), Err: cause})
		},
		Expired: func(h *holds.Hold, why string) error { return c.env.LostError(h, why) },
	})
}

// newWatchdog makes the watchdog of c (package watchdog), which renews
// through renewal and writes label.
func (c *Client) newWatchdog(renewal redis.UniversalClient, label watchdog.Label) *watchdog.Watchdog {
	return watchdog.New(watchdog.Config{
		Registry: c.env.Reg, Caller: c.env.RDB, Renewal: renewal,
		Life: c.life, Closed: c.closeCh, Slots: c.slots,
		Label: label, Log: c.env.Log, Warn: c.env.Warn,
		Gone: func(h *holds.Hold) error { return c.env.LostError(h, "the key no longer holds this owner") },
		Renewed: func(renewed, batches int, took time.Duration, err error) {
			c.observe(Event{Kind: EventRenewed, Renewed: renewed, Calls: batches, Took: took, Err: err})
		},
	})
}

// newSettler makes the settler of c (package settle). Its jobs' calls go
// through the watchdog's client, which honours ctx deadlines (package watchdog),
// each bounded by a second at most: a call stuck on a dead connection ends
// there rather than after go-redis' read timeouts and retries, so the work
// resumes soon after Redis answers again, and Close does not wait on a
// socket. Its ctx stays attached (calls.StayAttached): Close ends it.
func (c *Client) newSettler() *settle.Settler {
	return settle.New(settle.Config{
		Life:   calls.StayAttached(c.life),
		Try:    min(c.opts.ReleaseTimeout, time.Second),
		Failed: c.slots.Reload,
	})
}

// made reports whether NewClient made c (see errNotMade): the methods
// of a nil or zero Client refuse every call, and its constructors return
// nil handles, which refuse theirs.
func (c *Client) made() bool { return c != nil && c.env != nil }

// ID is the uuid that starts every owner token of this client.
func (c *Client) ID() string {
	if !c.made() {
		return ""
	}
	return c.env.ID
}

// Close stops the watchdog and the pub/sub hub. Waiters return ErrClosed;
// the ctx of every hold is cancelled with a cause wrapping ErrClosed, since
// no one renews it any more. Holds stay in Redis until their holders
// Unlock (which still works after Close) or their lease runs out. Close
// does not close the Redis client, which belongs to the caller.
func (c *Client) Close() error {
	if !c.made() {
		return errNotMade
	}
	if !c.env.Reg.Close(func(h *holds.Hold) error { return &LockError{Op: "renew", Name: h.Name, Key: h.Key, Err: ErrClosed} }) {
		return nil
	}
	close(c.closeCh)
	c.endLife() // every hold's ctx is already cancelled: renewals are moot
	c.env.Settler.Close()
	c.wd.Wait()
	if c.closeRenewal != nil {
		_ = c.closeRenewal()
	}
	c.wd.WaitJobs()
	c.env.Hub.Close()
	for _, n := range c.redNodes {
		_ = n.Close()
	}
	return nil
}

// observeGroupLoss reports the loss e of the atomic multi-lock g.
func (c *Client) observeGroupLoss(g *holds.Group, e holds.Event) {
	c.observe(Event{Kind: EventLost, Name: g.Name, Key: g.Keys, Lock: "multi", Owner: e.Owner, Deadline: e.Deadline, Err: e.Cause})
}

func (c *Client) observe(e Event) {
	if c.opts.Observer != nil {
		c.opts.Observer.ObserveLock(e)
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

// Shutdown stops the Client gracefully, as http.Server.Shutdown does a
// server, then closes it:
//
//  1. New acquisitions fail at once with an error wrapping ErrDraining,
//     and waiters that are not part of running work stop waiting with it.
//     An acquisition whose ctx carries a hold of this Client (a re-entry,
//     or a nested lock that running work needs to finish) still goes on.
//  2. It waits until every hold was released, or ctx is done; a hold
//     that an acquisition under way takes meanwhile (a woken waiter's
//     try, a hand-off being claimed) counts too.
//  3. What is still held then is ended: the hold's ctx is cancelled with a
//     cause wrapping ErrDraining and its lock is given back in Redis (so
//     another process need not wait out its lease).
//  4. It waits, up to the Client's ReleaseTimeout, for what is being
//     settled in the background: those give-backs, and what Redis refused
//     or did not answer a moment ago (a waiter's leave of a fair lock's
//     queue, an abandoned acquisition's give-back), which Close would
//     drop.
//  5. It closes the Client (see Close).
//
// It returns nil when every hold ended on its own, or ctx's error when
// some had to be cut. Close, without Shutdown, keeps its meaning: holds
// end at once; a Shutdown after Close, or one that Close overtakes,
// returns once Close has ended them and cuts nothing (their locks stay
// for their holders' Unlock, as after Close).
func (c *Client) Shutdown(ctx context.Context) error {
	if !c.made() {
		return errNotMade
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	c.drain()
	var cut error
	for round := 0; ; round++ {
		if !c.waitIdle(ctx) {
			cut = ctx.Err()
			c.cutHolds()
		}
		c.waitSettled(time.Now().Add(c.opts.ReleaseTimeout))
		// An acquisition under way as the last hold ended (a woken
		// waiter's try, a hand-off or grant being claimed) may have a hold
		// now: it is waited for, or cut, as the others were. (A cut hold's
		// running work cannot take more: its ctx is done.)
		if c.holdCount() == 0 || c.isClosed() || round == 3 {
			break
		}
	}
	return errors.Join(cut, c.Close())
}

// isClosed reports whether Close has begun.
func (c *Client) isClosed() bool {
	select {
	case <-c.closeCh:
		return true
	default:
		return false
	}
}

// drain refuses new acquisitions from now on (see Shutdown), on the
// Client and its RedLock nodes.
func (c *Client) drain() {
	c.drainOnce.Do(func() { close(c.drainCh) })
	for _, n := range c.redNodes {
		n.drain()
	}
}

// holdCount counts the holds of the Client and its RedLock nodes.
func (c *Client) holdCount() int {
	n := c.env.Reg.Len()
	for _, r := range c.redNodes {
		n += r.holdCount()
	}
	return n
}

// waitIdle waits until no hold is left, or the Client is closed (Close
// ended every hold, and their locks stay for their holders' Unlock), or
// ctx is done (false).
func (c *Client) waitIdle(ctx context.Context) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.holdCount() > 0 {
		select {
		case <-ctx.Done():
			return c.holdCount() == 0
		case <-c.closeCh:
			return true
		case <-tick.C:
		}
	}
	return true
}

// cutHolds ends every hold left and gives their locks back in the
// background (the engines' give-back of lost holds, which Shutdown then
// waits for: waitSettled).
func (c *Client) cutHolds() {
	c.redHolds.Cut()
	c.env.Reg.LoseAll(func(h *holds.Hold) error {
		return &LockError{Op: "shutdown", Name: h.Name, Key: h.Key,
			Err: fmt.Errorf("%w: Shutdown's ctx ended before the hold was released", ErrDraining)}
	})
	for _, n := range c.redNodes {
		n.cutHolds()
	}
}

// waitSettled waits until the acquisitions under way have returned (the
// drained ones return at once), the late replies of abandoned calls have
// come (lockenv.Env.Resolving), and the settlements under way (give-backs,
// a drained waiter's leave of a fair queue, reconciles) are done, on the
// Client and its RedLock nodes, or deadline: Close would quit them.
func (c *Client) waitSettled(deadline time.Time) {
	for (c.env.Acquiring.Load() > 0 || c.env.Resolving.Load() > 0 || !c.env.Settler.Idle()) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for _, n := range c.redNodes {
		n.waitSettled(deadline)
	}
}
