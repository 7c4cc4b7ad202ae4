package mutex

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/errs"
)

// Key and channel names follow Redisson's helpers exactly (package
// redisnames), so that Redisson and lockgen find the same keys and
// channels for the same lock name, and every key of one lock hashes to
// the same cluster slot.

// LockChannel is the channel a reentrant lock publishes its unlock message on.
func LockChannel(key string) string { return redisnames.Prefix("redisson_lock__channel", key) }

// RequestMarker names the marker key of one acquire request. The scripts
// write it only off the hot path: when a lost reply is settled (settle.lua),
// or when a resent copy finds its first copy done. It makes the outcome of
// that request final, so no copy of it arriving later takes the lock. One
// key per request: a later request of the same owner can never overwrite
// the proof an earlier one still needs.
func RequestMarker(key, requestID string) string {
	return redisnames.PrefixWith("lockgen_latch", key, requestID)
}

// Validate checks a lock key and a lease, for every kind of lock.
func Validate(key string, lease time.Duration) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", errs.InvalidKey)
	case !wellTagged(key):
		return fmt.Errorf("%w: %q has a '{' that opens no hash tag (a lock's other keys would land in other cluster slots); write a tag like {tenant} or escape the brace", errs.InvalidKey, key)
	case lease < 0:
		return fmt.Errorf("%w: negative lease %v (use Watchdog or a positive duration)", errs.InvalidLease, lease)
	case lease > 0 && lease < MinLease:
		return fmt.Errorf("%w: lease %v is shorter than %v", errs.InvalidLease, lease, MinLease)
	}
	return nil
}

// wellTagged reports whether key either has no "{" or has a hash tag as
// Redis reads one (the first "{" and the next "}" with text between):
// Redisson's name helpers leave a key with "{" alone, so its marker, channel
// and queue keys share its slot only when that "{" opens a real tag.
func wellTagged(key string) bool {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return true
	}
	return strings.IndexByte(key[open+1:], '}') > 0
}
