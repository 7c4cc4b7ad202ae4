// Package lua holds the Redis Lua scripts behind every lockgen lock.
//
// Each script lives in its own .lua file whose opening comment documents
// KEYS, ARGV and every return value. The scripts implement the semantics of
// Redisson's locks (see the key layout in the project README), so that a Go
// service using lockgen and a Java service using Redisson exclude and wake
// each other on the same key.
//
// Every key a script touches is passed in KEYS, and all KEYS of one call
// hash to one cluster slot, so the scripts run unchanged on Redis Cluster.
// The one exception is Redisson's own: read_release.lua builds the names of
// the other readers' timeout keys from a prefix passed in KEYS
// ("{<lock>}"); they carry the lock's hash tag, so they live in its slot.
//
// The hold-count rule every acquire script applies (resends, re-entries,
// lost holds, request markers) is written once, in count.lua: each acquire
// script is assembled at init as count.lua followed by its own file, and
// its SHA-1 is that of the assembled text. The semaphore scripts share
// the permit-expiry rule the same way, from reclaim.lua, the fair
// lock's release and leave who goes next, from fair_next.lua, and the
// reentrant lock's acquire, hand-off and leave the queue of lockgen's
// waiters, from grant_next.lua.
//
// A wake-up (PUBLISH or SPUBLISH of an unlock or grant message) is sent
// with redis.pcall, after the script's writes: a refused one (an ACL
// without PUBLISH) is a hint lost, not a failed script, so the reply still
// says what was written. Waiters do not count on it alone (the holder's
// TTL bounds their sleep, and key tracking sees a lock freed or granted).
//
// The exported values are ready *redis.Script values: Run sends EVALSHA with
// the SHA-1 computed at init and falls back to EVAL when the server answers
// NOSCRIPT (after a restart or SCRIPT FLUSH).
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed count.lua
	countSrc string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed settle.lua
	settleSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed handoff.lua
	handoffSrc string
	//go:embed grant_next.lua
	grantNextSrc string
	//go:embed mutex_leave.lua
	mutexLeaveSrc string
	//go:embed renew_batch.lua
	renewBatchSrc string
	//go:embed force_unlock.lua
	forceUnlockSrc string

	//go:embed fair_next.lua
	fairNextSrc string
	//go:embed fair_acquire.lua
	fairAcquireSrc string
	//go:embed fair_release.lua
	fairReleaseSrc string
	//go:embed fair_leave.lua
	fairLeaveSrc string
	//go:embed fair_force_unlock.lua
	fairForceUnlockSrc string

	//go:embed read_acquire.lua
	readAcquireSrc string
	//go:embed read_release.lua
	readReleaseSrc string
	//go:embed write_acquire.lua
	writeAcquireSrc string
	//go:embed write_release.lua
	writeReleaseSrc string
	//go:embed write_leave.lua
	writeLeaveSrc string
	//go:embed rw_force_unlock.lua
	rwForceUnlockSrc string

	//go:embed multi_acquire.lua
	multiAcquireSrc string
	//go:embed multi_release.lua
	multiReleaseSrc string

	//go:embed fenced_acquire.lua
	fencedAcquireSrc string

	//go:embed reclaim.lua
	reclaimSrc string
	//go:embed semaphore_acquire.lua
	semaphoreAcquireSrc string
	//go:embed semaphore_release.lua
	semaphoreReleaseSrc string
	//go:embed semaphore_settle.lua
	semaphoreSettleSrc string
	//go:embed semaphore_try_set.lua
	semaphoreTrySetSrc string
	//go:embed semaphore_add.lua
	semaphoreAddSrc string
	//go:embed semaphore_drain.lua
	semaphoreDrainSrc string
	//go:embed plain_semaphore_acquire.lua
	plainSemaphoreAcquireSrc string
	//go:embed plain_semaphore_release.lua
	plainSemaphoreReleaseSrc string

	//go:embed latch_try_set.lua
	latchTrySetSrc string
	//go:embed latch_count_down.lua
	latchCountDownSrc string
	//go:embed latch_delete.lua
	latchDeleteSrc string
)

var (
	// Acquire takes or re-enters a reentrant lock; see acquire.lua.
	Acquire = redis.NewScript(withCount(withGrantNext(acquireSrc)))
	// Settle decides the outcome of an acquire whose reply was lost, from
	// the owner's hold count; see settle.lua.
	Settle = redis.NewScript(settleSrc)
	// Release drops one hold of a reentrant lock; see release.lua.
	Release = redis.NewScript(releaseSrc)
	// Handoff is the last release of a reentrant lock that hands it to a
	// waiter of the same client when no one else listens, or grants it to
	// the longest waiter queued by lockgen's clients; see handoff.lua.
	Handoff = redis.NewScript(withGrantNext(handoffSrc))
	// MutexLeave takes a waiter of a reentrant lock that gave up out of
	// lockgen's queue; see mutex_leave.lua.
	MutexLeave = redis.NewScript(withGrantNext(mutexLeaveSrc))
	// RenewBatch extends the lease of up to MaxBatch holds in one slot; see renew_batch.lua.
	RenewBatch = redis.NewScript(renewBatchSrc)
	// ForceUnlock deletes a lock whoever holds it; see force_unlock.lua.
	ForceUnlock = redis.NewScript(forceUnlockSrc)

	// FairAcquire takes a fair lock or waits in line; see fair_acquire.lua.
	FairAcquire = redis.NewScript(withCount(fairAcquireSrc))
	// FairRelease drops one hold of a fair lock and wakes the head; see fair_release.lua.
	FairRelease = redis.NewScript(withFairNext(fairReleaseSrc))
	// FairLeave takes a waiter that gave up out of the queue; see fair_leave.lua.
	FairLeave = redis.NewScript(withFairNext(fairLeaveSrc))
	// FairForceUnlock deletes a fair lock whoever holds it; see fair_force_unlock.lua.
	FairForceUnlock = redis.NewScript(fairForceUnlockSrc)

	// ReadAcquire takes a read hold of a read-write lock; see read_acquire.lua.
	ReadAcquire = redis.NewScript(withCount(readAcquireSrc))
	// ReadRelease drops a read hold; see read_release.lua.
	ReadRelease = redis.NewScript(readReleaseSrc)
	// WriteAcquire takes the write hold of a read-write lock; see write_acquire.lua.
	WriteAcquire = redis.NewScript(withCount(writeAcquireSrc))
	// WriteRelease drops a write hold; see write_release.lua.
	WriteRelease = redis.NewScript(writeReleaseSrc)
	// WriteLeave withdraws a waiting writer (writers first); see write_leave.lua.
	WriteLeave = redis.NewScript(writeLeaveSrc)
	// RWForceUnlock deletes a read-write lock whoever holds it; see rw_force_unlock.lua.
	RWForceUnlock = redis.NewScript(rwForceUnlockSrc)

	// MultiAcquire takes several same-slot reentrant locks at once; see multi_acquire.lua.
	MultiAcquire = redis.NewScript(withCount(multiAcquireSrc))
	// MultiRelease drops one hold of each of several locks; see multi_release.lua.
	MultiRelease = redis.NewScript(multiReleaseSrc)

	// FencedAcquire takes or re-enters a fenced lock and returns its
	// fencing token in the same call; see fenced_acquire.lua.
	FencedAcquire = redis.NewScript(withCount(fencedAcquireSrc))

	// SemaphoreAcquire takes permits of a permit-expirable semaphore; see semaphore_acquire.lua.
	SemaphoreAcquire = redis.NewScript(withReclaim(semaphoreAcquireSrc))
	// SemaphoreRelease gives back the permits of one acquisition; see semaphore_release.lua.
	SemaphoreRelease = redis.NewScript(semaphoreReleaseSrc)
	// SemaphoreSettle decides a semaphore acquire whose reply was lost; see semaphore_settle.lua.
	SemaphoreSettle = redis.NewScript(semaphoreSettleSrc)
	// SemaphoreTrySet sets a semaphore's free count when absent; see semaphore_try_set.lua.
	SemaphoreTrySet = redis.NewScript(semaphoreTrySetSrc)
	// SemaphoreAdd adds to a semaphore's free count or sets its total; see semaphore_add.lua.
	SemaphoreAdd = redis.NewScript(withReclaim(semaphoreAddSrc))
	// SemaphoreDrain takes every free permit, or reads the free count; see semaphore_drain.lua.
	SemaphoreDrain = redis.NewScript(withReclaim(semaphoreDrainSrc))
	// PlainSemaphoreAcquire takes permits of a plain semaphore; see plain_semaphore_acquire.lua.
	PlainSemaphoreAcquire = redis.NewScript(plainSemaphoreAcquireSrc)
	// PlainSemaphoreRelease gives back permits of a plain semaphore; see plain_semaphore_release.lua.
	PlainSemaphoreRelease = redis.NewScript(plainSemaphoreReleaseSrc)

	// LatchTrySet arms a count-down latch when absent; see latch_try_set.lua.
	LatchTrySet = redis.NewScript(latchTrySetSrc)
	// LatchCountDown counts a latch down and releases its waiters at zero; see latch_count_down.lua.
	LatchCountDown = redis.NewScript(latchCountDownSrc)
	// LatchDelete deletes a latch without releasing its waiters; see latch_delete.lua.
	LatchDelete = redis.NewScript(latchDeleteSrc)
)

// MaxBatch is the largest number of keys sent in one RenewBatch call.
const MaxBatch = 400

// withReclaim prefixes the permit-expiry rule (reclaim.lua) to a
// semaphore script.
func withReclaim(body string) string { return reclaimSrc + "\n" + body }

// withGrantNext prefixes the reentrant lock's queue of lockgen waiters
// (grant_next.lua) to body.
func withGrantNext(body string) string { return grantNextSrc + "\n" + body }

// withFairNext prefixes the rule of who goes next on a free fair lock
// (fair_next.lua) to a fair script.
func withFairNext(body string) string { return fairNextSrc + "\n" + body }

// withCount prefixes the hold-count rule (count.lua) to an acquire script.
func withCount(body string) string { return countSrc + "\n" + body }
