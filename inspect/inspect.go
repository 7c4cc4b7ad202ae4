package inspect

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/lockgen/lockgen"
)

// DefaultLimit bounds how many instances of one lock are listed.
const DefaultLimit = 100

// Inspector reads the locks of one spec from one Redis deployment.
type Inspector struct {
	Spec  *lockgen.Spec
	Redis redis.UniversalClient // a server, a Sentinel failover client or a cluster
	// RedNodes are the independent masters red locks span, with their
	// addresses; without them a red lock is read from Redis.
	RedNodes []redis.UniversalClient
	RedAddrs []string
	Limit    int // instances listed per lock; 0 means DefaultLimit
}

// UsageError is a request that cannot be answered as asked: an unknown
// lock, a missing or ill-typed param (exit code 2 in the CLI).
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// IsUsage reports whether err is a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

func (in *Inspector) limit() int {
	if in.Limit > 0 {
		return in.Limit
	}
	return DefaultLimit
}

// lock returns the declared lock called name.
func (in *Inspector) lock(name string) (*lockgen.Lock, error) {
	if l := in.Spec.Lock(name); l != nil {
		return l, nil
	}
	names := make([]string, len(in.Spec.Locks))
	for i, l := range in.Spec.Locks {
		names[i] = l.Name
	}
	if s := lockgen.Suggest(name, names); s != "" {
		return nil, usagef("no lock %q in %s (did you mean %s?)", name, in.Spec.File, s)
	}
	return nil, usagef("no lock %q in %s (its locks: %v)", name, in.Spec.File, names)
}

// HasParams reports whether the lock name has key params (a multi lock:
// its members have). An unknown name has none.
func (in *Inspector) HasParams(name string) bool {
	l := in.Spec.Lock(name)
	return l != nil && len(paramsOf(l)) > 0
}

// Instance reads the lock name at the key its params render. A param
// value that starts with a double quote is Go-quoted, as JSON output
// carries a value that is not UTF-8 (see Instance.MarshalJSON): it is
// unquoted first.
func (in *Inspector) Instance(ctx context.Context, name string, params map[string]string) (Instance, error) {
	l, err := in.lock(name)
	if err != nil {
		return Instance{}, err
	}
	if err := in.checkParams(l, params); err != nil {
		return Instance{}, err
	}
	raw := make(map[string]string, len(params))
	for p, v := range params {
		u, ok := unquoted(v)
		if !ok {
			return Instance{}, usagef("%s=%q: not a Go-quoted string (a value that starts with \" is unquoted as Go does)", p, v)
		}
		raw[p] = u
	}
	params = raw
	r, err := newReader(ctx, in.Redis)
	if err != nil {
		return Instance{}, err
	}
	st, err := in.read(ctx, r, l, params)
	if err != nil {
		return Instance{}, err
	}
	r.label(ctx, &st)
	if err := r.labelErr(ctx); err != nil {
		return Instance{}, err
	}
	return st, nil
}

// checkParams refuses params the lock does not take.
func (in *Inspector) checkParams(l *lockgen.Lock, params map[string]string) error {
	known := map[string]bool{}
	var names []string
	for _, p := range paramsOf(l) {
		known[p] = true
		names = append(names, p)
	}
	for p := range params {
		if !known[p] {
			if s := lockgen.Suggest(p, names); s != "" {
				return usagef("%s has no param %q (did you mean %s?)", l.Name, p, s)
			}
			return usagef("%s has no param %q (its params: %v)", l.Name, p, names)
		}
	}
	return nil
}

// paramsOf lists a lock's params (a multi lock's: its members').
func paramsOf(l *lockgen.Lock) []string {
	var names []string
	seen := map[string]bool{}
	locks := []*lockgen.Lock{l}
	if l.Kind == lockgen.Multi {
		locks = l.Leaves()
	}
	for _, lf := range locks {
		for _, p := range lf.Params {
			if !seen[p.Name] {
				seen[p.Name] = true
				names = append(names, p.Name)
			}
		}
	}
	return names
}

// read reads one instance of l; params must render its key.
func (in *Inspector) read(ctx context.Context, r *reader, l *lockgen.Lock, params map[string]string) (Instance, error) {
	st := Instance{Lock: l.Name, Kind: string(l.Kind)}
	if l.Kind == lockgen.Multi {
		for _, m := range l.Leaves() {
			ms, err := in.read(ctx, r, m, params)
			if err != nil {
				return st, err
			}
			st.Members = append(st.Members, ms)
		}
		st.Held = len(st.Members) > 0
		for _, ms := range st.Members {
			st.Held = st.Held && ms.Held
		}
		return st, nil
	}
	key, err := renderKey(l, params)
	if err != nil {
		return st, err
	}
	st.Key = key
	st.Params = keyParams(l, params)
	return st, in.readKey(ctx, r, l, &st)
}

// keyParams are the params of params that l's key uses.
func keyParams(l *lockgen.Lock, params map[string]string) map[string]string {
	out := map[string]string{}
	for _, p := range l.KeyPattern().Params() {
		out[p] = params[p]
	}
	return out
}

// readKey fills in st, whose Key is set, by l's kind: its holders, the
// waiters Redis records, what it does not record, and how many clients
// listen on the channel the unrecorded ones sleep on. A key it cannot
// read as the kind's is noted in st.Unreadable, not an error.
func (in *Inspector) readKey(ctx context.Context, r *reader, l *lockgen.Lock, st *Instance) error {
	return note(st, in.readKind(ctx, r, l, st))
}

func (in *Inspector) readKind(ctx context.Context, r *reader, l *lockgen.Lock, st *Instance) error {
	st.Unrecorded = unrecorded(l, r.cluster())
	switch kindOf(l) {
	case "fair":
		return r.fair(ctx, st)
	case "readwrite":
		st.Channel = rwChannel(st.Key)
		if err := r.readWrite(ctx, st); err != nil {
			return err
		}
		return r.listening(ctx, st)
	case "semaphore":
		st.Channel = semaphoreChannel(st.Key)
		if err := r.semaphore(ctx, st); err != nil {
			return err
		}
		return r.listening(ctx, st)
	case "latch":
		st.Channel = latchChannel(st.Key)
		if err := r.latch(ctx, st); err != nil {
			return err
		}
		return r.listening(ctx, st)
	case "red":
		if len(in.RedNodes) == 0 {
			return r.reentrant(ctx, r.rdb, st)
		}
		for i, node := range in.RedNodes {
			nr := r.sub(node)
			ns := Instance{Lock: st.Lock, Kind: st.Kind, Key: st.Key, Node: in.RedAddrs[i]}
			if err := nr.reentrant(ctx, node, &ns); err != nil {
				return fmt.Errorf("red node %s: %w", in.RedAddrs[i], err)
			}
			nr.label(ctx, &ns)
			if err := nr.labelErr(ctx); err != nil {
				return fmt.Errorf("red node %s: %w", in.RedAddrs[i], err)
			}
			if ns.Held {
				st.Held = true
			}
			st.Nodes = append(st.Nodes, ns)
		}
		return nil
	}
	if err := r.reentrant(ctx, r.rdb, st); err != nil {
		return err
	}
	if fenced(l) {
		st.Fenced = true
		if err := r.fenced(ctx, st); err != nil {
			return err
		}
	}
	// Read the grant queue whatever the lock's options: it is empty where
	// the runtime keeps none.
	if err := r.grantQueue(ctx, st); err != nil {
		return err
	}
	st.Channel = lockChannel(st.Key)
	return r.listening(ctx, st)
}

// unrecorded says which waiters of l Redis keeps no record of (see
// Instance.Unrecorded), as the runtime writes them: a reentrant lock's
// lockgen waiters are queued for grants only where its releases may grant
// (runtime Mutex.handsOff: not fenced, no syncReplicas, not on a cluster
// with classic pub/sub, Options.NoHandoff not set: docs/operating.md names
// the last two, which inspect cannot see), and only from their first try
// on; an atomic
// multi-lock's waiters are never queued; a read-write lock records its
// waiting writers with writers first only; semaphores (nor which owner
// holds a permit), latches and red locks record no waiter.
func unrecorded(l *lockgen.Lock, cluster bool) string {
	switch kindOf(l) {
	case "fair":
		return "" // Redisson's waiters and lockgen's alike are in its queue
	case "readwrite":
		if l.WritersFirst() {
			return "waiting readers"
		}
		return "every waiter (waiting writers are recorded with fairness writers: first only)"
	case "semaphore":
		return "every waiter"
	case "latch":
		return "every waiter (Await)"
	case "red":
		return "every waiter (RedLock waiters poll the nodes)"
	}
	switch {
	case cluster:
		return "Redisson's waiters, lockgen's before their first try or in an atomic multi-lock, and every waiter of a Client with classic pub/sub on a Redis Cluster"
	case fenced(l):
		return "every waiter (lockgen queues no waiter of a fenced lock)"
	case l.SyncReplicas > 0:
		return "every waiter (lockgen queues no waiter of a lock with syncReplicas)"
	}
	return "Redisson's waiters, and lockgen's before their first try or in an atomic multi-lock"
}

// kindOf is the kind's name as spec and output spell it.
func kindOf(l *lockgen.Lock) string { return string(l.Kind) }

// keyType is the Redis type of a kind's lock key, for SCAN's TYPE.
func keyType(l *lockgen.Lock) string {
	switch kindOf(l) {
	case "semaphore", "latch":
		return "string"
	}
	return "hash"
}

// Instances lists up to Limit live instances of the lock name, sorted by
// key; truncated reports that more exist. A multi lock's are its members'.
func (in *Inspector) Instances(ctx context.Context, name string) (list []Instance, truncated bool, err error) {
	l, err := in.lock(name)
	if err != nil {
		return nil, false, err
	}
	r, err := newReader(ctx, in.Redis)
	if err != nil {
		return nil, false, err
	}
	locks := []*lockgen.Lock{l}
	if l.Kind == lockgen.Multi {
		locks = l.Leaves()
	}
	for _, lf := range locks {
		got, more, err := in.instances(ctx, r, lf)
		if err != nil {
			return nil, false, err
		}
		list, truncated = append(list, got...), truncated || more
	}
	if err := r.labelAll(ctx, list); err != nil {
		return nil, false, err
	}
	return list, truncated, nil
}

func (in *Inspector) instances(ctx context.Context, r *reader, l *lockgen.Lock) ([]Instance, bool, error) {
	m := newMatcher(l)
	var keys []string
	var truncated bool
	if kindOf(l) == "red" && len(in.RedNodes) > 0 {
		seen := map[string]bool{}
		for _, node := range in.RedNodes {
			got, more, err := scanKeys(ctx, node, m, keyType(l), in.limit())
			if err != nil {
				return nil, false, err
			}
			truncated = truncated || more
			for _, k := range got {
				if !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
		sort.Strings(keys)
		if len(keys) > in.limit() {
			keys, truncated = keys[:in.limit()], true
		}
	} else {
		var err error
		if keys, truncated, err = scanKeys(ctx, in.Redis, m, keyType(l), in.limit()); err != nil {
			return nil, false, err
		}
	}
	read := make([]Instance, len(keys))
	err := readAll(ctx, len(keys), func(ctx context.Context, i int) error {
		params, _ := m.match(keys[i])
		read[i] = Instance{Lock: l.Name, Kind: string(l.Kind), Key: keys[i], Params: params}
		return in.readKey(ctx, r, l, &read[i])
	})
	if err != nil {
		return nil, false, err
	}
	var list []Instance
	for _, st := range read {
		// Else gone between SCAN and read: not live. A key that could
		// not be read is listed, with its note.
		if st.Held || len(st.Queue) > 0 || st.Count != nil || st.Free != nil || len(st.Unreadable) > 0 {
			list = append(list, st)
		}
	}
	return list, truncated, nil
}

// readConcurrency is how many instances a view reads at once: their
// round trips overlap, so a view over a slow link takes a few round trips
// per batch, not per key. It stays below go-redis's default pool size.
const readConcurrency = 16

// readAll runs read(0) … read(n-1), up to readConcurrency at once, and
// returns the first error (none is started once one failed).
func readAll(ctx context.Context, n int, read func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readConcurrency)
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return read(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err() // out of time before every read was started
}

// Summary lists every declared lock with its live instances (up to Limit
// each) and the waiters queued on them. A lock whose instances cannot be
// listed has its Error set; the others are listed all the same.
func (in *Inspector) Summary(ctx context.Context) ([]Summary, error) {
	r, err := newReader(ctx, in.Redis)
	if err != nil {
		return nil, err
	}
	r.uncounted = true
	var out []Summary
	for _, l := range in.Spec.Locks {
		s := Summary{Lock: l.Name, Kind: string(l.Kind), Fenced: fenced(l), Pattern: l.KeyPattern().Text}
		if l.Kind == lockgen.Multi {
			var names []string
			for _, m := range l.Leaves() {
				names = append(names, m.Name)
			}
			s.Pattern = fmt.Sprintf("members %v", names)
			s.Live = -1
			out = append(out, s)
			continue
		}
		list, more, err := in.instances(ctx, r, l)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("%s: %w", l.Name, err) // out of time: so is every lock after it
		case err != nil:
			s.Error = err.Error()
			out = append(out, s)
			continue
		}
		s.Live, s.Truncated = len(list), more
		for _, st := range list {
			s.Waiting += len(st.Queue)
		}
		out = append(out, s)
	}
	return out, nil
}
