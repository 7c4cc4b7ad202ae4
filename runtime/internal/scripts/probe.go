package scripts

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Whether a command was sent.
//
// A script call that fails without a reply has an unknown outcome only if
// go-redis put the command on a connection. It often did not: the ctx was
// done before a connection was free (the pool's wait returns ctx.Err()),
// no connection could be made (a dial error, ErrPoolTimeout, a failed
// HELLO on a fresh connection), or the client was closed. Those errors
// alone do not prove it, though: go-redis retries a command whose
// connection broke (MaxRetries, 3 by default, and the cluster client's own
// retries), so the error it returns may come from a later attempt (a
// dial error, or the ctx error of the backoff sleep) after an earlier one
// wrote the command and lost its reply.
//
// So the proof is taken where the bytes are made: go-redis serializes an
// argument that implements encoding.BinaryMarshaler by calling
// MarshalBinary while it writes the command to a connection, in every
// attempt, and nowhere else. Script.Run passes the script's SHA-1 as a
// sendProbe, and a failure whose probe was never marshalled cannot have
// reached Redis: its error is wrapped in notSentError, which NotSent
// recognises. Marshalled means "maybe sent", even if the write then
// failed: when in doubt, it was sent.
type sendProbe struct {
	sha   string
	buf   []byte
	wrote atomic.Bool
}

var sendProbes = sync.Pool{New: func() any { return new(sendProbe) }}

// newSendProbe returns a probe that marshals as sha.
func newSendProbe(sha string) *sendProbe {
	p := sendProbes.Get().(*sendProbe)
	p.sha = sha
	p.buf = append(p.buf[:0], sha...)
	p.wrote.Store(false)
	return p
}

// MarshalBinary is called by go-redis when it writes the command.
func (p *sendProbe) MarshalBinary() ([]byte, error) {
	p.wrote.Store(true)
	return p.buf, nil
}

// String is what go-redis prints for the argument (Cmd.String, hooks).
func (p *sendProbe) String() string { return p.sha }

// finish marks cmd's error as "not sent" if the probe was never written,
// and recycles the probe: the caller has put the plain SHA back in the
// command's arguments, so nothing refers to it any more.
func (p *sendProbe) finish(cmd *redis.Cmd) {
	if err := cmd.Err(); err != nil && !p.wrote.Load() && !IsReply(err) {
		cmd.SetErr(&notSentError{err})
	}
	sendProbes.Put(p)
}

// notSentError wraps the error of a command that provably never left the
// client.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// IsReply reports whether err is a reply from the server (a script error,
// WRONGTYPE, ..., or redis.Nil), as opposed to a transport or ctx error
// after which the outcome of a command is unknown.
func IsReply(err error) bool {
	var re interface{ RedisError() }
	return errors.As(err, &re)
}

// NotSent reports whether err is the error of a script call that provably
// never left the client (go-redis never wrote it on any attempt), so there
// is no outcome to settle. Anything else that is not a reply may have
// reached Redis.
func NotSent(err error) bool {
	var ns *notSentError
	return errors.As(err, &ns)
}
