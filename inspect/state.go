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
	Queue   []Waiter `json:"queue,omitempty"`   // fair: in order; readwrite: waiting writers
	// Semaphore: permits free, and each held permit with its expiry.
	Free    *int64   `json:"free,omitempty"`
	Permits []Permit `json:"permits,omitempty"`
	Count   *int64   `json:"count,omitempty"` // latch: parties still to count down
	// Fenced: the lock hands out fencing tokens; Token is the last one
	// handed out (absent before the first acquisition).
	Fenced bool   `json:"fenced,omitempty"`
	Token  *int64 `json:"token,omitempty"`
	// Members (multi) and Nodes (red: one per RedLock node).
	Members []Instance `json:"members,omitempty"`
	Nodes   []Instance `json:"nodes,omitempty"`
	Node    string     `json:"node,omitempty"` // red: the node's address
}

// NoExpiry is the TTL of a key that never expires.
const NoExpiry Duration = -1

// Holder is one owner's holds on a lock.
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
	// Redisson: no lockgen label exists for the client (see package doc).
	Redisson bool      `json:"redisson,omitempty"`
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Name     string    `json:"name,omitempty"`
	Since    time.Time `json:"since,omitzero"`
}

// Waiter is one queued waiter: Deadline is when the others may skip it
// (fair) or stop letting it go first (waiting writers), as a time left.
type Waiter struct {
	Owner    string   `json:"owner"`
	Deadline Duration `json:"deadline_ms"`
	Who      Who      `json:"who"`
}

// Permit is one held semaphore permit.
type Permit struct {
	ID     string   `json:"id"`     // hex of the raw permit id
	Expiry Duration `json:"ttl_ms"` // NoExpiry: never
}

// Summary is one declared lock's live instances, for the no-argument view.
type Summary struct {
	Lock      string `json:"lock"`
	Kind      string `json:"kind"`
	Fenced    bool   `json:"fenced,omitempty"`
	Pattern   string `json:"pattern"`
	Live      int    `json:"live"`
	Truncated bool   `json:"truncated,omitempty"` // more than Live exist
	Waiting   int    `json:"waiting,omitempty"`   // queued waiters among them
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
