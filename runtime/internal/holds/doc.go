// Package holds is the hold registry: what one Client knows of the locks
// it holds. It owns the holds by (key, field), the acquisitions of each
// (the contexts handed to callers), the turns of calls in flight, the
// marks of unknown outcomes, and the two schedules a hold is on: the lease
// clock (package leaseclock: when its deadline passes) and the renewal
// wheel (package renew: when its next renewal is due). It sends nothing
// to Redis.
//
// The registry is sharded by key: every field of a hold is guarded by the
// mutex of its key's shard, so calls on unrelated locks never wait for
// each other's bookkeeping, and nothing is allocated under a shard mutex.
//
// Invariants:
//
//   - a hold is in the registry from its first acquisition until its last
//     release or its loss, whichever comes first; a hold that left is never
//     renewed again (the watchdog takes only holds still in it);
//   - a hold is lost at most once, and every ctx of it is cancelled before
//     Lost reports it (the ctx ends before anyone else can be granted the
//     lock: the clock ends it at its deadline, design.md §7);
//   - an acquisition's ctx is a child of the ctx it was made with, except
//     under another hold of the same key by its owner (a read hold taken
//     by the writer: a downgrade): that hold's release does not end it,
//     its loss does, and so do its own hold's end and the end (or
//     deadline) of what the first hold of the key was taken under;
//   - a fixed-lease hold that runs out is given back when another hold of
//     its owner keeps the key alive (a write hold beside a read hold);
//     otherwise Redis expires it with the key;
//   - the calls of one owner on one lock take turns (Enter/Exit): the lock
//     scripts check the hold count the client expects, which is what tells
//     a resent request from a new one, so those calls must not overlap;
//   - an unknown mark, left by a call whose outcome is unknown, stays
//     until a call in the owner's turn re-read the count (or a background
//     settlement of that mark's generation did);
//   - a call abandoned at its deadline is late until its outcome lands
//     (Abandon, Landed): while it is, a copy of it may still change the
//     owner's count in Redis, and the owner's next call waits (WaitLate)
//     before it re-reads that count.
//
// What a hold loses, and why, is the caller's to say (Config.Lost and the
// causes it passes in): the registry only keeps the books.
package holds
