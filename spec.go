package lockgen

import "time"

// Spec is a validated locks.yaml.
type Spec struct {
	File     string // path of the spec as given; errors and docs name it
	Version  int
	Package  string // Go package name of the generated file
	Output   string // generated file, relative to the spec's directory
	Defaults Defaults
	Locks    []*Lock // in declaration order

	packagePos Pos
	outputPos  Pos
	schemaRef  string // the local schema file the modeline names, or ""
	schemaPos  Pos    // of schemaRef in the modeline
	firstPos   Pos    // of the first top-level key: where errors about a field left out point
}

// Defaults apply to every lock that does not set the field itself.
type Defaults struct {
	Lease    Lease
	WaitTime Wait
	// SyncReplicas applies to the locks that can wait for replicas: every
	// kind but multi (its members wait with their own) and red (its nodes
	// are independent masters).
	SyncReplicas int
}

// Default values used when a spec leaves a field out.
const (
	DefaultOutput       = "locks_gen.go"
	DefaultWaitTime     = 5 * time.Second
	DefaultQueueTimeout = 5 * time.Minute
)

// Lease is how long a hold lasts: Watchdog (renewed while held) or a fixed
// duration after which the key expires.
type Lease struct {
	Watchdog bool
	Fixed    time.Duration
}

func (l Lease) String() string {
	if l.Watchdog {
		return "watchdog"
	}
	return l.Fixed.String()
}

// Wait is how long a With<Name> call waits for a lock: Forever (until the
// ctx is done) or a duration (0: try once).
type Wait struct {
	Forever bool
	D       time.Duration
}

func (w Wait) String() string {
	if w.Forever {
		return "forever"
	}
	return w.D.String()
}

// Kind is the kind of a lock.
type Kind string

// The kinds of lock the DSL knows.
const (
	Reentrant Kind = "reentrant"
	Fair      Kind = "fair"
	ReadWrite Kind = "readwrite"
	Multi     Kind = "multi"
	Red       Kind = "red"
	Semaphore Kind = "semaphore"
	Latch     Kind = "latch"
)

// Kinds lists every kind the DSL accepts, in documentation order.
var Kinds = []Kind{Reentrant, Fair, ReadWrite, Multi, Red, Semaphore, Latch}

// Lock is one declared lock.
type Lock struct {
	Name     string
	Pos      Pos // of the name
	Doc      string
	Kind     Kind
	Key      Pattern  // as written; empty for multi
	Slot     Pattern  // empty when not set
	Params   []*Param // none for multi: its helpers take the union of its members'
	Lease    Lease
	WaitTime Wait
	Fairness *Fairness // fair and readwrite only; nil when not written
	Members  []string  // multi only, as written
	Atomic   bool      // multi only: members proven reentrant and in one cluster slot
	Quorum   Quorum    // red only
	// SyncReplicas > 0: every acquisition waits until that many replicas
	// have it, or is undone. Always 0 for multi, red, semaphore and latch.
	SyncReplicas int
	// Fenced (reentrant only): every acquisition also gets a fencing token
	// (Redisson RFencedLock).
	Fenced bool
	// Permits (semaphore only, >= 1): the number a fresh semaphore starts with.
	Permits int
	// Count (latch only, >= 1): what the latch is armed with.
	Count int

	kindPos         Pos             // of the kind value, or of the name when kind is left out
	paramsPos       Pos             // of the params mapping, when present
	membersPos      Pos             // of the members list, when present
	memberPos       []Pos           // of each member
	atomicPos       Pos             // of the atomic key, when present
	quorumPos       Pos             // of the quorum value, when present
	syncReplicasPos Pos             // of the syncReplicas key, when present
	broken          bool            // not a mapping, or params unreadable: skip the cross-field checks
	membersBroken   bool            // members is not a list (reported)
	fieldAt         map[string]Pos  // the fields written, by name (fairness.writers): where errors about them point
	rejected        map[string]bool // params declared with an unusable name or type
	paramNames      []string        // every usable param name written, in order, even with an unusable type: what an undeclared placeholder may mean

	// leaves are the locks a multi lock takes, set once its members are
	// valid: nested multi locks flattened, each lock once, in member order.
	leaves []*Lock
}

// Param is a key parameter: its Go name and type.
type Param struct {
	Name string
	Type ParamType
	Pos  Pos // of the type, where type errors point

	namePos Pos
}

// Fairness is the fairness mapping of a lock: queueTimeout for a fair
// lock, writers for a readwrite lock.
type Fairness struct {
	// QueueTimeout (fair): how long a queued waiter may go silent before
	// the others skip it. DefaultQueueTimeout when not written.
	QueueTimeout time.Duration
	// WritersFirst (readwrite, writers: first): a waiting writer holds back
	// new readers. False (writers: redisson) keeps Redisson's order, where
	// readers join a read-held lock whenever they come.
	WritersFirst bool

	pos             Pos // of the fairness key
	queueTimeoutPos Pos // of the queueTimeout key, when written
	writersPos      Pos // of the writers key, when written
}

// Writer orders of a readwrite lock (fairness.writers); redisson is the
// default.
const (
	writersRedisson = "redisson" // readers join a read-held lock whenever they come (Redisson's order)
	writersFirst    = "first"    // a waiting writer holds back new readers
)

// QueueTimeout is how long a queued waiter of a fair lock may go silent
// before the others skip it.
func (l *Lock) QueueTimeout() time.Duration {
	if l.Fairness == nil {
		return DefaultQueueTimeout
	}
	return l.Fairness.QueueTimeout
}

// WritersFirst reports whether a waiting writer of a readwrite lock holds
// back new readers (fairness: {writers: first}).
func (l *Lock) WritersFirst() bool {
	return l.Fairness != nil && l.Fairness.WritersFirst
}

// Quorum is how many of the RedLock nodes a red lock must win. N == 0
// (quorum: majority) means a majority of the nodes the runtime is given.
type Quorum struct {
	N int
}

// key is the key as the generated code renders it: the slot, when set,
// becomes a hash tag.
func (l *Lock) key() Pattern {
	if l.Slot.set && l.Key.set {
		return withSlot(l.Key, l.Slot)
	}
	return l.Key
}

// Lock returns the declared lock called name, or nil.
func (s *Spec) Lock(name string) *Lock {
	for _, l := range s.Locks {
		if l.Name == name {
			return l
		}
	}
	return nil
}
