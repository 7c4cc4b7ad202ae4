// Package inspect reads the live state of the locks a locks.yaml declares
// from Redis, for people on call and for scripts: who holds a lock and for
// how long more, who waits for it, and every live instance of a lock. It
// is what `lockgen inspect` runs.
//
// It reads the layout the runtime writes (Redisson's, design.md §4 and §8)
// and never writes: its commands are HGETALL, PTTL, LRANGE, ZRANGE, GET,
// TIME, PUBSUB NUMSUB and SHARDNUMSUB, and SCAN (with TYPE), never KEYS. A
// fenced lock is shown with the last token handed out, a semaphore with its
// free count and each held permit's expiry (a permit whose lease ran out
// counts as free, as the next script on the semaphore will find it), a
// latch with the count left. A lock's live instances are found with SCAN
// over a glob derived from its key pattern (literal text escaped, a
// placeholder matched by *), on every master of a cluster or only on the
// one that serves a pattern whose hash tag is literal, and the keys found
// are then matched exactly against the pattern, and each value parsed
// with its param's type, so a key of another lock that the glob happens to
// match, or one no generated helper could have made (an integer out of its
// type's range or not as strconv writes it, a stray % in a string), is not
// reported; a string param is reported unescaped, as the application
// passed it.
//
// Waiters are shown where Redis records them: a reentrant lock's grant
// queue (lockgen_lock_queue, with when each waiter first waited), a fair
// lock's queue (redisson_lock_queue, with its deadlines), a read-write
// lock's waiting writers (writers first). What Redis does not record (a
// semaphore's or latch's waiters, waiting readers, Redisson's reentrant
// waiters, every reentrant waiter on a cluster, which owner holds a
// permit) is named as such (Instance.Unrecorded), with the number of
// subscribers of the channel those waiters sleep on. No hold carries a
// start time: the layout records none.
//
// An owner token "<client uuid>:<n>" is shown with the label its lockgen
// Client keeps in Redis (runtime.OwnerLabelKey: host, pid and
// Options.Name). An owner without a label is shown as Redisson's, unless a
// key only lockgen writes (its queues) names it: then it is a lockgen
// Client's that has not held a lock yet (the label is written at a
// Client's first hold) or is gone.
//
// Tables show a value read from Redis (a key, a param, an owner, a label)
// Go-quoted, as strconv.Quote writes it, when it is not printable UTF-8 or
// starts with a double quote: no escape sequence or line break of a key
// reaches the terminal or adds a row. JSON carries values exactly, but
// for a key (and its channel) or param value that is not UTF-8 or starts
// with a double quote: JSON cannot carry such bytes, so it is Go-quoted
// there too, and Inspector.Instance unquotes a param value that starts
// with a double quote, so that JSON output reads back.
package inspect
