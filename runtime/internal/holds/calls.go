package holds

import (
	"context"
	"time"
)

// A turn is one owner's acquire or release call in flight on one lock
// (see the package doc: the calls of one owner on one lock take turns).
type turn struct {
	next chan struct{} // made by the first call waiting behind this one
}

// Enter waits until no other call on id is in flight (or ctx is done) and
// makes this one the call in flight; Exit ends it. It returns the hold
// count of id and the PEXPIRE an acquisition with lease applies (State).
func (r *Registry) Enter(ctx context.Context, id ID, lease time.Duration) (int, time.Duration, error) {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	for {
		t, busy := sh.turns[id]
		if !busy {
			break
		}
		if t.next == nil {
			t.next = make(chan struct{})
			sh.turns[id] = t
		}
		sh.mu.Unlock()
		select {
		case <-t.next:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
		sh.mu.Lock()
	}
	sh.turns[id] = turn{}
	count, px := r.stateLocked(sh, id, lease)
	sh.mu.Unlock()
	return count, px, nil
}

// Exit ends the call Enter started and lets the next one in.
func (r *Registry) Exit(id ID) {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	t := sh.turns[id]
	delete(sh.turns, id)
	sh.mu.Unlock()
	if t.next != nil {
		close(t.next)
	}
}

// EnterAll enters the turns of ids in their order (callers sort them, so
// two calls never wait on each other crosswise), fills counts with their
// hold counts and pxs (if not nil) with the PEXPIRE each applies, and
// returns the longest.
func (r *Registry) EnterAll(ctx context.Context, ids []ID, lease time.Duration, counts []int, pxs []time.Duration) (time.Duration, error) {
	var longest time.Duration
	for i, id := range ids {
		n, px, err := r.Enter(ctx, id, lease)
		if err != nil {
			r.ExitAll(ids[:i])
			return 0, err
		}
		counts[i] = n
		if pxs != nil {
			pxs[i] = px
		}
		longest = max(longest, px)
	}
	return longest, nil
}

// ExitAll exits the turns of ids.
func (r *Registry) ExitAll(ids []ID) {
	for _, id := range ids {
		r.Exit(id)
	}
}

// Unknown marks: after an unknown outcome the owner's count in Redis may
// be one more than the client's, so its next call re-reads the count
// (design.md §7). A mark's generation tells a background settlement
// whether the mark is still its own.

// MarkUnknown records that the outcome of the call in id's turn is
// unknown, and returns the mark's generation. The caller has the turn.
func (r *Registry) MarkUnknown(id ID) uint64 {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return r.markLocked(sh, id)
}

// MarkLost marks the outcome of the calls on h, lost at its deadline,
// unknown. h's shard mutex is held.
func (r *Registry) MarkLost(h *Hold) uint64 { return r.markLocked(h.sh, ID{h.Key, h.Field}) }

func (r *Registry) markLocked(sh *shard, id ID) uint64 {
	gen := r.unknownGen.Add(1)
	if _, ok := sh.unknown[id]; !ok {
		r.unknownN.Add(1)
	}
	sh.unknown[id] = gen
	return gen
}

// Mark returns the generation of id's unknown mark, 0 if none.
func (r *Registry) Mark(id ID) uint64 {
	if r.unknownN.Load() == 0 {
		return 0 // the hot path: no lock taken
	}
	sh := r.shard(id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.unknown[id]
}

// Unknown reports whether the last outcome of a call on id is unknown.
func (r *Registry) Unknown(id ID) bool { return r.Mark(id) != 0 }

// DropMark forgets that the outcome of a call on id is unknown: the mark
// of generation gen, or any mark if gen is 0.
func (r *Registry) DropMark(id ID, gen uint64) {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if g, ok := sh.unknown[id]; ok && (gen == 0 || g == gen) {
		delete(sh.unknown, id)
		r.unknownN.Add(-1)
	}
}

// Late calls: a call abandoned at its deadline goes on to its reply, and
// until then a copy of it may still change the owner's count in Redis, so
// nobody may re-read that count and take it for settled (the package doc).

// late is the abandoned calls on one ID whose outcome has not come.
type late struct {
	n      int
	landed chan struct{} // closed when n drops, made by the first waiter
}

// Abandon records that the call in id's turn was abandoned at its
// deadline: its outcome is unknown (MarkUnknown, whose generation it
// returns) and late until Landed(id). The caller has the turn.
func (r *Registry) Abandon(id ID) uint64 {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l := sh.late[id]
	l.n++
	sh.late[id] = l
	return r.markLocked(sh, id)
}

// Landed records that the outcome of a call Abandon counted on id came.
func (r *Registry) Landed(id ID) {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	l := sh.late[id]
	if l.n--; l.n <= 0 {
		delete(sh.late, id)
	} else {
		sh.late[id] = late{n: l.n}
	}
	sh.mu.Unlock()
	if l.landed != nil {
		close(l.landed)
	}
}

// Late reports whether an abandoned call on id has not had its outcome.
func (r *Registry) Late(id ID) bool {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.late[id].n > 0
}

// WaitLate returns once no abandoned call on id is late, or when ctx ends.
func (r *Registry) WaitLate(ctx context.Context, id ID) {
	sh := r.shard(id.Key)
	for {
		sh.mu.Lock()
		l, ok := sh.late[id]
		if !ok {
			sh.mu.Unlock()
			return
		}
		if l.landed == nil {
			l.landed = make(chan struct{})
			sh.late[id] = l
		}
		sh.mu.Unlock()
		select {
		case <-l.landed:
		case <-ctx.Done():
			return
		}
	}
}
