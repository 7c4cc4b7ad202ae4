package inspect

import "time"

// Instance is the live state of one lock instance (one key). Durations
// are read from Redis at one moment; JSON carries them in milliseconds,
// -1 for no expiry.
type Instance struct {
	Lock   string            `json:"lock"`
	Kind   string            `json:"kind"`
	Key    string            `json:"key,omitempty"`
	Params map[string]string `json:"params,omitempty"`
	Held   bool              `json:"held"`
	// TTL is the key's remaining time to live: 0 when it is absent,
	// NoExpiry when it has none.
	TTL     Duration `json:"ttl_ms"`
	Mode    string   `json:"mode,omitempty"`    // readwrite: read or write
	Holders []Holder `json:"holders,omitempty"` // owners with their hold counts
	// Queue is every waiter Redis records, in order: a reentrant lock's
	// lockgen grant queue (lockgen_lock_queue), a fair lock's queue
	// (redisson_lock_queue), a read-write lock's waiting writers (writers
	// first only).
	Queue []Waiter `json:"queue,omitempty"`
	// Unrecorded names, in words, the waiters of this instance that Redis
	// keeps no record of, so that Queue cannot list them ("" when it
	// lists them all).
	Unrecorded string `json:"unrecorded,omitempty"`
	// Listening is how many connections are subscribed to Channel, the
	// channel this instance's waiters sleep on (its release wakes them
	// there). It counts clients (one connection per lockgen Client), not
	// waiters, and includes those of recorded waiters and Clients whose
	// last waiter left moments ago. Absent where the kind has none to
	// count (fair: one channel per waiter, all queued; red: its waiters
	// poll), in a summary, and when Redis refused to count (PUBSUB not
	// allowed, a cluster node down).
	Listening *int64 `json:"listening,omitempty"`
	Channel   string `json:"channel,omitempty"`
	// Semaphore: permits free, and each held permit with its expiry.
	Free    *int64   `json:"free,omitempty"`
	Permits []Permit `json:"permits,omitempty"`
	Count   *int64   `json:"count,omitempty"` // latch: parties still to count down
	// Fenced: the lock hands out fencing tokens; Token is the last one
	// handed out (absent before the first acquisition). TokenUnreadable
	// says why Token is absent when the token key holds no decimal number
	// (or is not a string): the rest of the instance is read all the same.
	Fenced          bool   `json:"fenced,omitempty"`
	Token           *int64 `json:"token,omitempty"`
	TokenUnreadable string `json:"token_unreadable,omitempty"`
	// Unreadable notes each key of this instance that could not be read
	// (one of the wrong type, a count that is no number), with why: the
	// rest of the instance is read all the same, and a list or summary
	// still shows the other instances and locks.
	Unreadable []string `json:"unreadable,omitempty"`
	// Members (multi) and Nodes (red: one per RedLock node).
	Members []Instance `json:"members,omitempty"`
	Nodes   []Instance `json:"nodes,omitempty"`
	Node    string     `json:"node,omitempty"` // red: the node's address
}

// NoExpiry is the TTL of a key that never expires.
const NoExpiry Duration = -1

// Holder is one owner's holds on a lock. It carries no start time: the
// layout records none (a hold is a hash field with a count, a permit an
// expiry), so inspect cannot say since when a hold has been held.
type Holder struct {
	Owner string `json:"owner"`
	Count int64  `json:"count"`
	Side  string `json:"side,omitempty"` // readwrite: read or write
	// ReadTTLs are a reader's holds' own remaining TTLs (readwrite), one
	// per read hold.
	ReadTTLs []Duration `json:"read_ttls_ms,omitempty"`
	Who      Who        `json:"who"`
}

// Who says which process an owner token belongs to.
type Who struct {
	// Client is the uuid part of the owner token.
	Client string `json:"client"`
	// NoLabel: Redis holds no label for the client (see package doc).
	NoLabel bool `json:"no_label,omitempty"`
	// Redisson: no label, and no lockgen-only key names the owner (as
	// lockgen's queues do): taken for a Redisson client's.
	Redisson bool   `json:"redisson,omitempty"`
	Host     string `json:"host,omitempty"`
	PID      int    `json:"pid,omitempty"`
	Name     string `json:"name,omitempty"`
	// ClientStarted is when the lockgen Client was created (its label's
	// "since"): not when any hold or wait began.
	ClientStarted time.Time `json:"client_started,omitzero"`
}

// Waiter is one queued waiter: Deadline is, as a time left, when the
// others may skip it (fair; reentrant: its registration's end, which its
// next try renews) or stop letting it go first (waiting writers). Since
// is when it first waited, where Redis records it (reentrant), and Waited
// the time from then to the read, both by the server's clock.
type Waiter struct {
	Owner    string    `json:"owner"`
	Since    time.Time `json:"since,omitzero"`
	Waited   Duration  `json:"waited_ms,omitempty"`
	Deadline Duration  `json:"deadline_ms"`
	Who      Who       `json:"who"`
}

// Permit is one held semaphore permit. It names no owner: the layout
// (Redisson's) records a permit as a random id and an expiry only, and
// the runtime keeps no map from permit to owner in Redis.
type Permit struct {
	ID     string   `json:"id"`     // hex of the raw permit id
	Expiry Duration `json:"ttl_ms"` // NoExpiry: never
	// Who holds it: a lockgen permit id starts with its Client's uuid
	// (runtime.PermitOwnerLen bytes), whose owner label names it; nil
	// when no live label matches (a Redisson permit, or a Client gone).
	Who *Who `json:"who,omitempty"`
}

// Summary is one declared lock's live instances, for the no-argument view.
type Summary struct {
	Lock      string `json:"lock"`
	Kind      string `json:"kind"`
	Fenced    bool   `json:"fenced,omitempty"`
	Pattern   string `json:"pattern"`
	Live      int    `json:"live"`
	Truncated bool   `json:"truncated,omitempty"` // more than Live exist
	Waiting   int    `json:"waiting,omitempty"`   // waiters Redis records among them (Instance.Queue)
	// Error says why this lock's instances could not be listed (SCAN
	// refused, a node down): the other locks are summarised all the same.
	Error string `json:"error,omitempty"`
}

// Duration is a time.Duration that JSON writes as whole milliseconds.
type Duration time.Duration

// MarshalJSON writes d in milliseconds, and NoExpiry as -1 (as PTTL
// does): written as a duration it would be 0, which reads as "absent".
func (d Duration) MarshalJSON() ([]byte, error) {
	if d == NoExpiry {
		return []byte("-1"), nil
	}
	return []byte(formatInt(time.Duration(d).Milliseconds())), nil
}
