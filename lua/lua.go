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
	//go:embed acquire.lua
	acquireSrc string
	//go:embed settle.lua
	settleSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed renew_batch.lua
	renewBatchSrc string
	//go:embed force_unlock.lua
	forceUnlockSrc string
)

var (
	// Acquire takes or re-enters a reentrant lock; see acquire.lua.
	Acquire = redis.NewScript(acquireSrc)
	// Settle decides the outcome of an acquire whose reply was lost; see settle.lua.
	Settle = redis.NewScript(settleSrc)
	// Release drops one hold of a reentrant lock; see release.lua.
	Release = redis.NewScript(releaseSrc)
	// RenewBatch extends the lease of up to 100 holds in one slot; see renew_batch.lua.
	RenewBatch = redis.NewScript(renewBatchSrc)
	// ForceUnlock deletes a lock whoever holds it; see force_unlock.lua.
	ForceUnlock = redis.NewScript(forceUnlockSrc)
)

// MaxBatch is the largest number of keys sent in one RenewBatch call.
const MaxBatch = 100
