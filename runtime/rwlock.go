package runtime

// RWLock is a read-write lock with Redisson RReadWriteLock's layout: many
// readers or one writer. Both sides are reentrant, and a writer may also
// take read holds (downgrade: after its write holds are released it keeps
// reading), and write again through them while it still writes. A reader
// that does not write asking to write (upgrade) gets ErrUpgrade at once
// instead of waiting forever for itself.
//
// The hash at the key has field "mode" (read | write), one field per
// reading owner with its hold count, and "<owner>:write" for the writer.
// Each read hold n also has its own key {key}:<owner>:rwlock_timeout:<n>,
// renewed by the watchdog with the hash. A read release sets the hash's
// TTL to the longest one left among the readers' timeout keys (deleting
// the lock when none is alive), as Redisson's does, so a crashed reader,
// lockgen's or Redisson's, stops holding the lock when its own lease runs
// out, however long the other readers renew. Waiters sleep on
// redisson_rwlock:{key}: a read release ("0") wakes one waiter, a write
// release ("1") wakes them all.
type RWLock struct {
	read, write Mutex
}

// Read is the shared side: many owners may hold it at once. Of a nil
// *RWLock it is a nil *Mutex, whose methods refuse every call.
func (l *RWLock) Read() *Mutex {
	if l == nil {
		return nil
	}
	return &l.read
}

// Write is the exclusive side (a nil *Mutex of a nil *RWLock).
func (l *RWLock) Write() *Mutex {
	if l == nil {
		return nil
	}
	return &l.write
}
