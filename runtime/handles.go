package runtime

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockgen/lockgen/runtime/internal/mutex"
	"github.com/lockgen/lockgen/runtime/internal/redlock"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// The constructors of the lock handles. A handle is cheap: make one per
// key as needed.

// Mutex returns the reentrant, non-fair lock at key.
func (c *Client) Mutex(key string, opts LockOptions) *Mutex {
	if !c.made() {
		return nil
	}
	return newMutex(c, key, opts, mutex.Reentrant, false)
}

// FairLock returns the fair lock at key: a reentrant lock granted in the
// order of arrival, with Redisson RFairLock's layout. Waiters queue in
// redisson_lock_queue:{key}; only the head of the queue may take a free
// lock, and a release wakes only the head, on its own channel
// redisson_lock__channel:{key}:<owner>.
//
// A waiter keeps its place while it lives: it refreshes its score in
// redisson_lock_timeout:{key} every QueueTimeout/3. A waiter whose process
// is gone is skipped QueueTimeout after its last refresh; one that gives
// up (wait time over, ctx cancelled) leaves the queue at once.
//
// Go and Java waiters may share one queue. Redisson lowers every waiter's
// score by its wait timeout each time one of its clients takes the lock,
// so a lockgen waiter's score is raised by one QueueTimeout per Redisson
// waiter ahead of it (lockgen_fair_waiters:{key} tells them apart), and a
// lockgen waiter a Redisson client popped anyway re-enqueues as soon as it
// tries. Set Redisson's fairLockWaitTimeout to the lock's QueueTimeout
// (both default to 5 min).
func (c *Client) FairLock(key string, opts LockOptions) *Mutex {
	if !c.made() {
		return nil
	}
	if opts.QueueTimeout == 0 {
		opts.QueueTimeout = defaultQueueTimeout
	}
	return newMutex(c, key, opts, mutex.Fair, false)
}

// ReadWrite returns the read-write lock at key. With opts.WritersFirst, a
// waiting writer holds back new readers.
func (c *Client) ReadWrite(key string, opts LockOptions) *RWLock {
	if !c.made() {
		return nil
	}
	l := &RWLock{read: Mutex{opts: opts}, write: Mutex{opts: opts}}
	l.read.init(c, key, mutex.Read, false)
	l.write.init(c, key, mutex.Write, false)
	return l
}

// FencedLock returns the fenced reentrant lock at key.
func (c *Client) FencedLock(key string, opts LockOptions) *FencedLock {
	if !c.made() {
		return nil
	}
	return &FencedLock{newMutex(c, key, opts, mutex.Reentrant, true)}
}

// MultiLock returns the multi-lock over members. opts gives the name, the
// lease and the wait time of the whole; the members' own lease and wait
// time are not used.
func (c *Client) MultiLock(opts LockOptions, members ...*Mutex) *MultiLock {
	if !c.made() {
		return nil
	}
	l := &MultiLock{c: c, opts: opts}
	ms, err := membersOf(c, members)
	if err != nil {
		l.invalid = err
		return l
	}
	l.members, l.atomic = ms, len(ms) > 1
	for _, m := range ms {
		if !m.e.Batchable() || c.env.Cluster && scripts.KeySlot(m.Key()) != scripts.KeySlot(ms[0].Key()) {
			l.atomic = false
		}
	}
	if l.atomic {
		locks := make([]*mutex.Lock, len(ms))
		for i, m := range ms {
			locks[i] = &m.e
		}
		l.multi = mutex.NewMulti(c.mutexes, opts.Name, locks)
	}
	return l
}

// membersOf returns the members of a multi-lock of c sorted by key, one
// handle per lock. It refuses nil members, locks of another Client, and
// two different locks on one key.
func membersOf(c *Client, members []*Mutex) ([]*Mutex, error) {
	for _, m := range members {
		switch {
		case m == nil:
			return nil, fmt.Errorf("%w: a nil member", ErrInvalidArgument)
		case m.c != c:
			return nil, fmt.Errorf("%w: member %q is a lock of another Client (its holds would be that Client's, and this multi-lock could not release them)", ErrInvalidArgument, m.Key())
		}
	}
	ms := slices.Clone(members)
	slices.SortStableFunc(ms, func(a, b *Mutex) int { return strings.Compare(a.Key(), b.Key()) })
	for i := 1; i < len(ms); i++ {
		if prev, m := ms[i-1], ms[i]; prev.Key() == m.Key() && !prev.e.Same(&m.e) {
			return nil, fmt.Errorf("%w: two different locks on key %q (%s and %s): a multi-lock holds one lock per key", ErrInvalidArgument, m.Key(), prev.e.Describe(), m.e.Describe())
		}
	}
	return slices.CompactFunc(ms, func(a, b *Mutex) bool { return a.Key() == b.Key() }), nil
}

// RedLock returns the RedLock at key over the Client's RedLock nodes.
// opts.Quorum of 0 means a majority of the nodes.
func (c *Client) RedLock(key string, opts LockOptions) *RedLock {
	if !c.made() {
		return nil
	}
	nodes := make([]*mutex.Env, len(c.redNodes))
	for i, n := range c.redNodes {
		nodes[i] = n.mutexes
	}
	return &RedLock{c: c, opts: opts, e: redlock.New(c.env, &c.redHolds, nodes, key, opts.Quorum, opts.engine(false))}
}

// Semaphore returns the permit-expirable semaphore at key.
func (c *Client) Semaphore(key string, opts SemaphoreOptions) *Semaphore {
	if !c.made() {
		return nil
	}
	s := &Semaphore{c: c, opts: opts}
	s.e.Init(c.env, key, opts.Name, opts.Permits)
	return s
}

// PlainSemaphore returns the plain semaphore at key; name is used in errors.
func (c *Client) PlainSemaphore(key, name string) *PlainSemaphore {
	if !c.made() {
		return nil
	}
	p := &PlainSemaphore{c: c}
	p.e.Init(c.env, key, name)
	return p
}

// Latch returns the count-down latch at key. On a cluster, key must not
// carry a hash tag: Redisson always wraps the whole name in braces to name
// the channel, which then hashes to another slot than the key, and a
// sharded publish from the key's script would be refused.
func (c *Client) Latch(key string, opts LatchOptions) *Latch {
	if !c.made() {
		return nil
	}
	l := &Latch{c: c, opts: opts}
	l.e.Init(c.env, key, opts.Name)
	return l
}
