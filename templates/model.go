package templates

import "time"

// File is everything one generated file declares.
type File struct {
	Path    string            // import path of the generated package
	Package string            // package name of the generated package
	Source  string            // the spec's path from the generated file's directory, e.g. "locks.yaml" or "../locks.yaml", quoted in docs
	Imports map[string]string // import path -> package name, for user param types
	Locks   []Lock            // in declaration order

	// DocElsewhere: another file of the package has the package doc, so
	// the generated one continues it rather than starting "Package x".
	DocElsewhere bool
}

// Lock is one lock to emit.
type Lock struct {
	Name     string // exported Go name, e.g. OrderLock
	Doc      string // the spec's doc text, may be empty or span lines
	Kind     string // "reentrant", "fair", "readwrite", "multi", "red", "semaphore" or "latch"
	Key      string // the key pattern as it will be rendered (slot applied); "" for multi
	Segments []Segment
	Params   []Param
	Lease    time.Duration // 0: watchdog
	WaitTime time.Duration // negative: forever

	SyncReplicas int           // > 0: every acquisition waits until that many replicas have it
	QueueTimeout time.Duration // fair: how long a queued waiter may go silent before others skip it
	WritersFirst bool          // readwrite: a waiting writer holds back new readers
	Quorum       int           // red: how many RedLock nodes must grant the lock; 0: a majority
	Fenced       bool          // reentrant: every acquisition gets a fencing token
	Permits      int           // semaphore: the permits a fresh semaphore starts with
	Count        int           // latch: what Arm<Name> sets the count to

	// Members (multi) are the locks a multi lock takes, none of them
	// multi, each once; Params is the union of theirs. A readwrite member
	// is taken on its write side.
	Members []Lock
	Atomic  bool // multi: members proven reentrant and in one cluster slot
}

// Segment is literal key text or a param placeholder.
type Segment struct {
	Lit   string
	Param string
}

// Param is a typed key parameter.
type Param struct {
	Name     string
	TypePath string // import path of a user type; "" for a basic type
	TypeName string // e.g. "int64" or "OrderID"
	Basic    bool   // TypeName is a Go basic type used as is (no conversion)
	Render   Render
}

// Render says how a param value becomes key text.
type Render int

// How params become key text. String-like values are escaped (see
// keyPart in the generated file) so no value can move a key to another
// cluster slot or make two keys collide.
const (
	RenderString   Render = iota + 1 // underlying string: escaped
	RenderInt                        // underlying signed integer: strconv.FormatInt
	RenderUint                       // underlying unsigned integer: strconv.FormatUint
	RenderBool                       // underlying bool: strconv.FormatBool
	RenderStringer                   // fmt.Stringer: String(), escaped
	RenderText                       // encoding.TextMarshaler: MarshalText(), escaped; may fail
)

// escaped reports whether the rendering goes through keyPart.
func (r Render) escaped() bool {
	return r == RenderString || r == RenderStringer || r == RenderText
}

// fallible reports whether rendering the lock's key can fail (a param is
// only a TextMarshaler), which gives its handle constructor an error result.
// A multi lock's params are its members', so it is fallible when one of
// them is.
func (l *Lock) fallible() bool {
	for _, p := range l.Params {
		if p.Render == RenderText {
			return true
		}
	}
	return false
}
