// Package inspect reads the live state of the locks a locks.yaml declares
// from Redis, for people on call and for scripts: who holds a lock, since
// when and for how long, who waits for it, and every live instance of a
// lock. It is what `lockgen inspect` runs.
//
// It reads the layout the runtime writes (Redisson's, design.md §4 and §8)
// and never writes: its commands are HGETALL, PTTL, LRANGE, ZRANGE, GET,
// TIME and SCAN (with TYPE), never KEYS. A fenced lock is shown with the
// last token handed out, a semaphore with its free count and each held
// permit's expiry (a permit whose lease ran out counts as free, as the next
// script on the semaphore will find it), a latch with the count left. A lock's live instances are found with SCAN
// over a glob derived from its key pattern (literal text escaped, a
// placeholder matched by *), on every master of a cluster or only on the
// one that serves a pattern whose hash tag is literal, and the keys found
// are then matched exactly against the pattern, so a key of another lock
// that the glob happens to match is not reported.
//
// An owner token "<client uuid>:<n>" is shown with the label its lockgen
// Client keeps in Redis (runtime.OwnerLabelKey: host, pid and
// Options.Name); an owner without a label is shown as Redisson's.
package inspect
