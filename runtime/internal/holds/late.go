package holds

import "context"

// Late calls.
//
// A call abandoned at its deadline (on a client that does not honour
// deadlines on reads) goes on to its reply. Until that comes, a copy of
// the request may still run in Redis and change the owner's count there
// (a re-entry's copy counts one hold more), so nobody may re-read that
// count and take it for settled: the owner's release that follows would
// expect a count the copy changes under it. Abandon marks the outcome
// unknown, as any lost reply does, and also counts the call as late until
// Landed; Late and WaitLate let the owner's next call wait for it.

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
