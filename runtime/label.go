package runtime

import (
	"os"
	"strconv"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

// The owner label: who a Client is, for people reading Redis.
//
// An owner token "<client uuid>:<n>" names a Client, not a process. So
// that `lockgen inspect` (and anyone with redis-cli) can say which process
// holds a lock, every Client that holds a lock keeps a small hash at
// OwnerLabelKey(uuid):
//
//	lockgen_owner:<uuid>   host <hostname>  pid <pid>  name <Options.Name>  since <epoch ms>
//
// It is written when the Client's watchdog loop starts (at its first
// hold, of any lease) and rewritten with a TTL of WatchdogTimeout every
// WatchdogTimeout/3 by that loop, like a watchdog renewal, for as long as
// the Client is open. A process that dies leaves it for one
// WatchdogTimeout, as long as its watchdog holds. The name starts with
// "lockgen_", which no Redisson key or channel does, and it is a single
// key, so it may live in any cluster slot. A lock whose owner has no label
// is held by a Redisson client (which writes none), or by a lockgen client
// whose label has expired (its process is gone, or it held a fixed lease
// longer than WatchdogTimeout when it died).

// OwnerLabelKey is the key of the label of the Client whose ID is uuid.
func OwnerLabelKey(uuid string) string { return "lockgen_owner:" + uuid }

// OwnerLabel is what a Client's label key holds.
type OwnerLabel struct {
	Host  string    // os.Hostname() of the process
	PID   int       // os.Getpid() of the process
	Name  string    // Options.Name; empty when not set
	Since time.Time // when the Client was created
}

// ParseOwnerLabel reads a label from the fields of its hash (HGETALL). It
// reports false when fields holds no label.
func ParseOwnerLabel(fields map[string]string) (OwnerLabel, bool) {
	pid, err := strconv.Atoi(fields["pid"])
	if err != nil {
		return OwnerLabel{}, false
	}
	l := OwnerLabel{Host: fields["host"], PID: pid, Name: fields["name"]}
	if ms, err := strconv.ParseInt(fields["since"], 10, 64); err == nil {
		l.Since = time.UnixMilli(ms)
	}
	return l, true
}

// ownerLabel is the label of a Client whose owner tokens carry id (a
// RedLock node's carry its parent's), as the watchdog writes it.
func ownerLabel(id, name string, since time.Time) watchdog.Label {
	host, _ := os.Hostname()
	return watchdog.Label{Key: OwnerLabelKey(id), Fields: []any{
		"host", host,
		"pid", strconv.Itoa(os.Getpid()),
		"name", name,
		"since", strconv.FormatInt(since.UnixMilli(), 10),
	}}
}
