package holds

import (
	"context"
	"time"
)

// Enter waits until no other call of id's owner on its lock is in flight
// (or ctx is done) and makes this one the call in flight, until Exit. It
// returns State(id, lease). A turn's channel, made by the first call
// waiting behind it, is closed by Exit.
func (r *Registry) Enter(ctx context.Context, id ID, lease time.Duration) (int, time.Duration, error) {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	for {
		next, busy := sh.turns[id]
		if !busy {
			break
		}
		if next == nil {
			next = make(chan struct{})
			sh.turns[id] = next
		}
		sh.mu.Unlock()
		select {
		case <-next:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
		sh.mu.Lock()
	}
	sh.turns[id] = nil
	count, px := r.stateLocked(sh, id, lease)
	sh.mu.Unlock()
	return count, px, nil
}

// Exit ends the call Enter started and lets the next one in.
func (r *Registry) Exit(id ID) {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	next := sh.turns[id]
	delete(sh.turns, id)
	sh.mu.Unlock()
	if next != nil {
		close(next)
	}
}

// EnterAll enters the turns of ids in order (callers sort them, so two
// calls never wait on each other crosswise), fills counts and pxs (if not
// nil) as Enter returns them, and returns the longest px.
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
// be one more than the client's, so its next call re-reads it (design.md
// §7). A mark's generation tells a background settlement whether the mark
// is still its own.

// MarkUnknown marks the outcome of the call in id's turn (the caller's)
// unknown and returns the mark's generation.
func (r *Registry) MarkUnknown(id ID) uint64 {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return r.markLocked(sh, id)
}

// MarkLost marks the calls on h, lost at its deadline, unknown. h's shard
// mutex is held.
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
		return 0
	}
	sh := r.shard(id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.unknown[id]
}

// Unknown reports whether the last outcome of a call on id is unknown.
func (r *Registry) Unknown(id ID) bool { return r.Mark(id) != 0 }

// DropMark drops id's mark if its generation is gen (0: any).
func (r *Registry) DropMark(id ID, gen uint64) {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if g, ok := sh.unknown[id]; ok && (gen == 0 || g == gen) {
		delete(sh.unknown, id)
		r.unknownN.Add(-1)
	}
}

// late counts the abandoned calls on one ID whose outcome has not come:
// until it does, a copy may still change the owner's count in Redis, so
// nobody may re-read that count and take it for settled.
type late struct {
	n      int
	landed chan struct{} // closed when n drops, made by the first waiter
}

// Abandon records that the call in id's turn (the caller's) was abandoned
// at its deadline: marked unknown (its generation is returned) and late
// until Landed(id).
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
