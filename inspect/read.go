package inspect

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

// reader reads lock state with read-only commands and resolves owner
// tokens to labels, each client's label once.
//
// Instances are read concurrently (see readAll): mu guards the maps.
type reader struct {
	rdb    redis.UniversalClient
	now    time.Time // the server's clock, read once: scores are in its ms
	mu     sync.Mutex
	labels map[string]*runtime.OwnerLabel
	// byPrefix maps the hex of a uuid's first runtime.PermitOwnerLen
	// bytes to the uuid, for the live owner labels (permitOwner), listed
	// once (prefixes).
	byPrefix map[string]string
	prefixes sync.Once
	// lockgen: clients a lockgen-only key names (a queue only lockgen
	// writes): theirs even without a label.
	lockgen map[string]bool
	// uncounted: leave Instance.Listening out (the summary shows none).
	uncounted bool
	// failed: the first owner label read that failed (labelErr). A who
	// that could not be read is unknown, not "no label" (Redisson's).
	failed error
}

func newReader(ctx context.Context, rdb redis.UniversalClient) (*reader, error) {
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	return &reader{rdb: rdb, now: now, labels: map[string]*runtime.OwnerLabel{}, lockgen: map[string]bool{}}, nil
}

// sub reads a RedLock node with r's clock.
func (r *reader) sub(rdb redis.UniversalClient) *reader {
	return &reader{rdb: rdb, now: r.now, labels: map[string]*runtime.OwnerLabel{}, lockgen: map[string]bool{}}
}

// cluster reports whether r reads a Redis Cluster.
func (r *reader) cluster() bool {
	_, ok := r.rdb.(*redis.ClusterClient)
	return ok
}

// ttl converts a PTTL reply: go-redis gives -1 and -2 unscaled.
func ttl(d time.Duration) Duration {
	switch {
	case d == -2:
		return 0
	case d < 0:
		return NoExpiry
	}
	return Duration(d)
}

// untilScore is the time from now to a score in epoch ms.
func (r *reader) untilScore(score float64) Duration {
	if score >= 922337203685477 { // Redisson's "never"
		return NoExpiry
	}
	return Duration(time.UnixMilli(int64(score)).Sub(r.now))
}

// lockHash reads a Redisson lock hash (reentrant, fair, readwrite, red):
// its fields and TTL.
func (r *reader) lockHash(ctx context.Context, rdb redis.UniversalClient, key string) (map[string]string, Duration, error) {
	var fields *redis.MapStringStringCmd
	var pttl *redis.DurationCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HGetAll(ctx, key)
		pttl = p.PTTL(ctx, key)
		return nil
	})
	if err != nil {
		return nil, 0, wrongType(key, err)
	}
	return fields.Val(), ttl(pttl.Val()), nil
}

// unreadableError is a key that holds no state of the kind read (the
// wrong type, a count that is no number): a note on its instance (see
// Instance.Unreadable), not a failure of the view.
type unreadableError struct{ msg string }

func (e *unreadableError) Error() string { return e.msg }

// wrongType turns Redis's WRONGTYPE for key into an unreadableError; nil
// and other errors are returned as they are.
func wrongType(key string, err error) error {
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		return &unreadableError{key + " is not a lock of this kind (WRONGTYPE): is the spec the one the application uses?"}
	}
	return err
}

func notDecimal(key, what string) error {
	return &unreadableError{key + " does not hold a decimal " + what + ": is the spec the one the application uses?"}
}

// note records err on in when it is an unreadableError, so that one stray
// key neither hides the rest of the instance nor fails a list or summary;
// any other error (Redis unreachable, a timeout) is returned.
func note(in *Instance, err error) error {
	var u *unreadableError
	if errors.As(err, &u) {
		in.Unreadable = append(in.Unreadable, err.Error())
		return nil
	}
	return err
}

// reentrant fills in a reentrant (or red node's, or fenced) lock.
func (r *reader) reentrant(ctx context.Context, rdb redis.UniversalClient, in *Instance) error {
	fields, t, err := r.lockHash(ctx, rdb, in.Key)
	if err != nil {
		return err
	}
	in.TTL = t
	for owner, v := range fields {
		n, _ := strconv.ParseInt(v, 10, 64)
		in.Holders = append(in.Holders, Holder{Owner: owner, Count: n})
	}
	in.Held = len(in.Holders) > 0
	sortHolders(in.Holders)
	return nil
}

// fenced reads the last fencing token of a fenced lock. A token key that
// holds no decimal number, or is not a string, is reported in
// in.TokenUnreadable, not as an error: it must not hide the lock's state,
// nor fail a summary of every lock.
func (r *reader) fenced(ctx context.Context, in *Instance) error {
	key := fenceToken(in.Key)
	get := r.rdb.Get(ctx, key)
	v, err := get.Int64()
	switch {
	case errors.Is(err, redis.Nil):
		return nil
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		in.TokenUnreadable = wrongType(key, err).Error()
		return nil
	case err != nil && get.Err() == nil:
		in.TokenUnreadable = notDecimal(key, "token").Error()
		return nil
	case err != nil:
		return err
	}
	in.Token = &v
	return nil
}

// fair adds the queue of a fair lock: the list's order, the zset's scores.
func (r *reader) fair(ctx context.Context, in *Instance) error {
	if err := r.reentrant(ctx, r.rdb, in); err != nil {
		return err
	}
	var queue *redis.StringSliceCmd
	var scores *redis.ZSliceCmd
	_, _ = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		queue = p.LRange(ctx, fairQueue(in.Key), 0, -1)
		scores = p.ZRangeWithScores(ctx, fairTimeouts(in.Key), 0, -1)
		return nil
	})
	if err := note(in, wrongType(fairQueue(in.Key), queue.Err())); err != nil {
		return err
	}
	if err := note(in, wrongType(fairTimeouts(in.Key), scores.Err())); err != nil {
		return err
	}
	score := map[string]float64{}
	for _, z := range scores.Val() {
		score[z.Member.(string)] = z.Score
	}
	for _, owner := range queue.Val() {
		w := Waiter{Owner: owner, Deadline: NoExpiry}
		if s, ok := score[owner]; ok {
			w.Deadline = r.untilScore(s)
		}
		in.Queue = append(in.Queue, w)
	}
	// lockgen's own record of its waiters tells them from Redisson's.
	if len(in.Queue) > 0 {
		mine, err := r.rdb.ZRange(ctx, fairWaiters(in.Key), 0, -1).Result()
		if err := note(in, wrongType(fairWaiters(in.Key), err)); err != nil {
			return err
		}
		for _, owner := range mine {
			r.markLockgen(clientOf(owner))
		}
	}
	return nil
}

// grantQueue adds the waiters of a reentrant lock that lockgen queued for
// grants across processes (runtime/internal/mutex/grant.go, lua/grant_next.lua): the
// queue's order and each waiter's first wait (its score), and from its
// record ("<lease>:<alive until>:<nonce>") when a release will skip it.
// A waiter without a record is skipped by the next release.
func (r *reader) grantQueue(ctx context.Context, in *Instance) error {
	var queue *redis.ZSliceCmd
	var records *redis.MapStringStringCmd
	_, _ = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		queue = p.ZRangeWithScores(ctx, grantQueue(in.Key), 0, -1)
		records = p.HGetAll(ctx, grantRecords(in.Key))
		return nil
	})
	if err := note(in, wrongType(grantQueue(in.Key), queue.Err())); err != nil {
		return err
	}
	if err := note(in, wrongType(grantRecords(in.Key), records.Err())); err != nil {
		return err
	}
	for _, z := range queue.Val() {
		owner := z.Member.(string)
		w := Waiter{Owner: owner, Since: scoreTime(z.Score)}
		if !w.Since.IsZero() {
			w.Waited = Duration(max(r.now.Sub(w.Since), 0))
		}
		if rec := strings.SplitN(records.Val()[owner], ":", 3); len(rec) == 3 {
			if alive, err := strconv.ParseFloat(rec[1], 64); err == nil {
				w.Deadline = max(r.untilScore(alive), 0)
			}
		}
		in.Queue = append(in.Queue, w)
		r.markLockgen(clientOf(owner))
	}
	return nil
}

// listening counts the connections subscribed to in.Channel: with PUBSUB
// NUMSUB and SHARDNUMSUB (a lockgen or Redisson client on a cluster uses
// sharded pub/sub where the server has it), summed over every node of a
// cluster, where each node counts its own subscribers. A server without
// sharded pub/sub refuses SHARDNUMSUB: it counts 0 there. The count is
// extra: when Redis refuses it (an ACL without PUBSUB, a node down) it is
// left out, not an error that hides the lock's state.
func (r *reader) listening(ctx context.Context, in *Instance) error {
	if r.uncounted {
		return nil
	}
	if err := r.countListeners(ctx, in); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

func (r *reader) countListeners(ctx context.Context, in *Instance) error {
	ch := in.Channel
	count := func(ctx context.Context, node redis.UniversalClient) (int64, error) {
		var classic, sharded *redis.MapStringIntCmd
		_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
			classic = p.PubSubNumSub(ctx, ch)
			sharded = p.PubSubShardNumSub(ctx, ch)
			return nil
		})
		if err := classic.Err(); err != nil {
			return 0, err
		}
		n := classic.Val()[ch]
		if sharded.Err() == nil {
			n += sharded.Val()[ch]
		}
		return n, nil
	}
	var total atomic.Int64
	cc, ok := r.rdb.(*redis.ClusterClient)
	if !ok {
		n, err := count(ctx, r.rdb)
		if err != nil {
			return err
		}
		total.Store(n)
	} else if err := cc.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := count(ctx, node)
		total.Add(n)
		return err
	}); err != nil {
		return err
	}
	n := total.Load()
	in.Listening = &n
	return nil
}

// readWrite reads a read-write lock: mode, the writer, each reader with
// its read holds' own TTLs, and the waiting writers (writers first).
func (r *reader) readWrite(ctx context.Context, in *Instance) error {
	fields, t, err := r.lockHash(ctx, r.rdb, in.Key)
	if err != nil {
		return err
	}
	in.TTL, in.Mode = t, fields["mode"]
	for f, v := range fields {
		if f == "mode" {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		if owner, ok := strings.CutSuffix(f, ":write"); ok {
			in.Holders = append(in.Holders, Holder{Owner: owner, Count: n, Side: "write"})
			continue
		}
		in.Holders = append(in.Holders, Holder{Owner: f, Count: n, Side: "read"})
	}
	sortHolders(in.Holders)
	in.Held = len(in.Holders) > 0
	var cmds []*redis.DurationCmd
	var writers *redis.ZSliceCmd
	_, _ = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, h := range in.Holders {
			if h.Side != "read" {
				continue
			}
			for n := int64(1); n <= min(h.Count, 100); n++ {
				cmds = append(cmds, p.PTTL(ctx, readTimeoutKey(in.Key, h.Owner, n)))
			}
		}
		writers = p.ZRangeWithScores(ctx, rwWriters(in.Key), 0, -1)
		return nil
	})
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	if err := note(in, wrongType(rwWriters(in.Key), writers.Err())); err != nil {
		return err
	}
	i := 0
	for j := range in.Holders {
		h := &in.Holders[j]
		if h.Side != "read" {
			continue
		}
		for n := int64(1); n <= min(h.Count, 100); n++ {
			h.ReadTTLs = append(h.ReadTTLs, ttl(cmds[i].Val()))
			i++
		}
	}
	for _, z := range writers.Val() {
		owner, _ := strings.CutSuffix(z.Member.(string), ":write") // members are write fields
		in.Queue = append(in.Queue, Waiter{Owner: owner, Deadline: r.untilScore(z.Score)})
		r.markLockgen(clientOf(owner))
	}
	return nil
}

// semaphore reads a permit-expirable semaphore: the free count and every
// held permit with its expiry (Redisson's RPermitExpirableSemaphore).
//
// A permit whose expiry has passed is still in the sorted set until the
// next script on the semaphore reclaims it (every one does, first: see
// lua/reclaim.lua), and its number is not yet in the counter. Inspect
// cannot run that script (it never writes), so it shows what the next one
// will find: the expired permit is free, not held. Free is absent when the
// counter is (a semaphore no acquire or TrySetPermits has set up), even
// with expired permits: the next acquire sets it from Permits then.
func (r *reader) semaphore(ctx context.Context, in *Instance) error {
	var free *redis.StringCmd
	var pttl *redis.DurationCmd
	var permits *redis.ZSliceCmd
	_, _ = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		free = p.Get(ctx, in.Key)
		pttl = p.PTTL(ctx, in.Key)
		permits = p.ZRangeWithScores(ctx, permitTimeouts(in.Key), 0, -1)
		return nil
	})
	// Pipelined reports only the first command's error; an absent counter
	// (redis.Nil) must not hide the sorted set's.
	if err := free.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return wrongType(in.Key, err)
	}
	if err := note(in, wrongType(permitTimeouts(in.Key), permits.Err())); err != nil {
		return err
	}
	var expired int64
	for _, z := range permits.Val() {
		exp := r.untilScore(z.Score)
		if exp != NoExpiry && exp <= 0 {
			expired++ // the next script reclaims it: free
			continue
		}
		id := z.Member.(string)
		in.Permits = append(in.Permits, Permit{ID: hex.EncodeToString([]byte(id)), Expiry: exp, Who: r.permitOwner(ctx, id)})
	}
	if n, err := free.Int64(); err == nil {
		n += expired
		in.Free, in.TTL = &n, ttl(pttl.Val())
	} else if !errors.Is(err, redis.Nil) {
		return notDecimal(in.Key, "count")
	}
	in.Held = len(in.Permits) > 0
	return nil
}

// latch reads a count-down latch: the count left (absent: not armed or
// already at zero, when the last count-down deleted it) and its TTL (the
// runtime and Redisson set none).
func (r *reader) latch(ctx context.Context, in *Instance) error {
	var count *redis.StringCmd
	var pttl *redis.DurationCmd
	_, _ = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		count = p.Get(ctx, in.Key)
		pttl = p.PTTL(ctx, in.Key)
		return nil
	})
	n, err := count.Int64()
	switch {
	case errors.Is(err, redis.Nil):
		return nil
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return wrongType(in.Key, err)
	case err != nil && count.Err() == nil:
		return notDecimal(in.Key, "count")
	case err != nil:
		return err
	}
	in.Count, in.Held, in.TTL = &n, n > 0, ttl(pttl.Val())
	return nil
}

func sortHolders(hs []Holder) {
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].Side != hs[j].Side {
			return hs[i].Side == "write"
		}
		return hs[i].Owner < hs[j].Owner
	})
}

// who resolves the client of an owner token to its label, read once per
// client. An owner with no label is Redisson's (see the package doc),
// unless a queue only lockgen writes names its client.
func (r *reader) who(ctx context.Context, owner string) Who {
	client := clientOf(owner)
	r.mu.Lock()
	l, ok := r.labels[client]
	r.mu.Unlock()
	if !ok {
		if err := r.fetchLabels(ctx, []string{client}); err != nil {
			return Who{Client: client} // the view fails with labelErr
		}
		r.mu.Lock()
		l = r.labels[client]
		r.mu.Unlock()
	}
	if l == nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		return Who{Client: client, NoLabel: true, Redisson: !r.lockgen[client]}
	}
	return Who{Client: client, Host: l.Host, PID: l.PID, Name: l.Name, ClientStarted: readable(l.Since)}
}

// scoreTime is the time of a score in epoch ms, zero (unknown) when the
// score is no such time (±inf, or past what readable keeps).
func scoreTime(score float64) time.Time {
	const limit = 1 << 53 // exact in a float64, far beyond year 9999
	if math.IsNaN(score) || score < -limit || score > limit {
		return time.Time{}
	}
	return readable(time.UnixMilli(int64(score)))
}

// readable is t, or zero (unknown) when t is outside years 1–9999: a time
// read from Redis that no writer meant, and that encoding/json refuses to
// write (which would fail the whole -json output).
func readable(t time.Time) time.Time {
	if y := t.Year(); y < 1 || y > 9999 {
		return time.Time{}
	}
	return t
}

// fetchLabels reads the labels of clients in one pipeline. A read that
// failed (a timeout, a lost connection) records nothing: caching it as
// "no label" would show a lockgen client as Redisson's. Its error is
// returned and kept for labelErr.
func (r *reader) fetchLabels(ctx context.Context, clients []string) error {
	if len(clients) == 0 {
		return nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(clients))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range clients {
			cmds[i] = p.HGetAll(ctx, runtime.OwnerLabelKey(c))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		r.fail(err)
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range clients {
		var l *runtime.OwnerLabel
		if label, found := runtime.ParseOwnerLabel(cmds[i].Val()); found {
			l = &label
		}
		r.labels[c] = l
	}
	return nil
}

// fail keeps err as the first failed owner read (see labelErr).
func (r *reader) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed == nil {
		r.failed = err
	}
}

// labelErr is why a view's owners may be wrong: an owner read that failed,
// or the view's ctx ended (a who read after it is unknown). A view
// returns it rather than show holders with no label.
func (r *reader) labelErr(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// markLockgen records that a lockgen-only key names client.
func (r *reader) markLockgen(client string) {
	r.mu.Lock()
	r.lockgen[client] = true
	r.mu.Unlock()
}

// permitOwner finds the Client whose uuid starts a permit id (see
// runtime.PermitOwnerLen) among the live owner labels, listed once per
// reader with SCAN. Nil when none matches.
func (r *reader) permitOwner(ctx context.Context, id string) *Who {
	if len(id) < runtime.PermitOwnerLen {
		return nil
	}
	r.prefixes.Do(func() {
		r.byPrefix = map[string]string{}
		prefix := runtime.OwnerLabelKey("")
		scan := func(ctx context.Context, node redis.UniversalClient) error {
			iter := node.Scan(ctx, 0, prefix+"*", scanBatch).Iterator()
			for iter.Next(ctx) {
				client := strings.TrimPrefix(iter.Val(), prefix)
				raw := strings.ReplaceAll(client, "-", "")
				if len(raw) >= 2*runtime.PermitOwnerLen {
					r.mu.Lock()
					r.byPrefix[raw[:2*runtime.PermitOwnerLen]] = client
					r.mu.Unlock()
				}
			}
			return iter.Err()
		}
		var err error
		if cc, ok := r.rdb.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
		} else {
			err = scan(ctx, r.rdb)
		}
		if err != nil {
			r.fail(err) // the permits' owners are unknown: the view fails
		}
	})
	r.mu.Lock()
	client, ok := r.byPrefix[hex.EncodeToString([]byte(id[:runtime.PermitOwnerLen]))]
	r.mu.Unlock()
	if !ok {
		return nil
	}
	r.markLockgen(client)
	w := r.who(ctx, client+":0")
	return &w
}

// clientOf is the client uuid of an owner token "<uuid>:<n>" (the token
// itself when it has no such shape).
func clientOf(owner string) string {
	if len(owner) > 36 && owner[36] == ':' { // a uuid, as both lockgen and Redisson write it
		return owner[:36]
	}
	if i := strings.LastIndexByte(owner, ':'); i > 0 {
		return owner[:i]
	}
	return owner
}

// labelAll fills in Who for every owner of list, reading the labels it
// has not read yet in one pipeline first. It returns labelErr.
func (r *reader) labelAll(ctx context.Context, list []Instance) error {
	seen := map[string]bool{}
	var missing []string
	var collect func(in *Instance)
	collect = func(in *Instance) {
		add := func(owner string) {
			c := clientOf(owner)
			if _, ok := r.labels[c]; !ok && !seen[c] {
				seen[c] = true
				missing = append(missing, c)
			}
		}
		for _, h := range in.Holders {
			add(h.Owner)
		}
		for _, q := range in.Queue {
			add(q.Owner)
		}
		for i := range in.Members {
			collect(&in.Members[i])
		}
	}
	r.mu.Lock()
	for i := range list {
		collect(&list[i])
	}
	r.mu.Unlock()
	if err := r.fetchLabels(ctx, missing); err != nil {
		return err
	}
	for i := range list {
		r.label(ctx, &list[i])
	}
	return r.labelErr(ctx)
}

// label fills in Who for every owner of in and its members.
func (r *reader) label(ctx context.Context, in *Instance) {
	for i := range in.Holders {
		in.Holders[i].Who = r.who(ctx, in.Holders[i].Owner)
	}
	for i := range in.Queue {
		in.Queue[i].Who = r.who(ctx, in.Queue[i].Owner)
	}
	for i := range in.Members {
		r.label(ctx, &in.Members[i])
	}
	// A red lock's nodes were labelled from their own servers (readKey).
}
