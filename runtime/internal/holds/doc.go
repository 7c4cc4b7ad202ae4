// Package holds is the hold registry: what one Client knows of the locks
// it holds. It owns the holds by (key, field), their acquisitions (the
// contexts handed to callers), the turns of calls in flight, the marks of
// unknown outcomes, and the two schedules a hold is on: the lease clock
// (package leaseclock) and the renewal wheel (package renew). It sends
// nothing to Redis.
//
// The registry is sharded by key: a hold is guarded by its key's shard
// mutex, so calls on unrelated locks never wait for each other's
// bookkeeping. An acquisition's ctx is made before the mutex is taken; a
// new Hold, the growth of the shard's map, schedules and a hold's list of
// acquisitions, and a renewal's extra keys (Taker.ExtraKeys) are
// allocated under it.
//
// Invariants:
//
//   - a hold is in the registry from its first acquisition until its last
//     release or its loss; a hold that left is never renewed again;
//   - a hold is lost at most once, and every ctx of it is cancelled before
//     Lost reports it (the clock ends it at its deadline, design.md §7);
//   - an acquisition's ctx is a child of the ctx it was made with, except
//     under another hold of the same key by its owner (a downgrade): that
//     hold's release does not end it; its loss does, and so do its own
//     hold's end and the end (or deadline) of what the key's first hold
//     was taken under;
//   - a fixed-lease hold that runs out is given back when another hold of
//     its owner keeps the key alive; otherwise Redis expires it;
//   - the calls of one owner on one lock take turns (Enter/Exit): the
//     scripts check the hold count the client expects, which tells a
//     resent request from a new one;
//   - an unknown mark stays until a call in the owner's turn re-read the
//     count (or a settlement of that mark's generation did);
//   - a call abandoned at its deadline is late until its outcome lands
//     (Abandon, Landed): a copy of it may still change the owner's count,
//     so the owner's next call waits (WaitLate) before re-reading it.
//
// What a hold loses, and why, is the caller's to say (Config.Lost).
package holds
