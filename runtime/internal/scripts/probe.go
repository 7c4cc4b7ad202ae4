package scripts

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/errs"
)

// A sendProbe proves whether a command was sent. A script call that fails
// without a reply has an unknown outcome only if go-redis put the command
// on a connection, which it often did not (no free connection in time, a
// failed dial, a closed client). The error does not prove it: go-redis
// retries a command whose connection broke, so the error may be a later
// attempt's after an earlier one wrote the command. go-redis calls
// MarshalBinary on an encoding.BinaryMarshaler argument while it writes
// the command, in every attempt, and nowhere else: Script.Run passes the
// SHA-1 as a sendProbe, and one never marshalled never reached Redis
// (notSentError). Marshalled means "maybe sent", even if the write failed.
type sendProbe struct {
	sha   string
	buf   []byte
	wrote atomic.Bool
}

var sendProbes = sync.Pool{New: func() any { return new(sendProbe) }}

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

// finish marks cmd's error as not sent if the probe was never written,
// and recycles the probe (the caller has put the plain SHA back).
func (p *sendProbe) finish(cmd *redis.Cmd) {
	if err := cmd.Err(); err != nil && !p.wrote.Load() && !IsReply(err) {
		cmd.SetErr(&notSentError{err})
	}
	sendProbes.Put(p)
}

// notSentError wraps the error of a command that provably never left.
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
// never left the client: there is no outcome to settle.
func NotSent(err error) bool {
	var ns *notSentError
	return errors.As(err, &ns)
}

// Refused reports whether err is a reply that refused the command before
// it ran, for a state that passes: TRYAGAIN (its slot is half moved),
// MOVED or ASK past go-redis' redirects (its slot moved meanwhile),
// CLUSTERDOWN, MASTERDOWN, LOADING or READONLY (a failover or restart in
// progress), BUSY (another program's script runs past
// busy-reply-threshold), OOM (maxmemory reached under noeviction: Redis
// refuses a script at its first command that may grow memory, and only
// while it has written nothing), NOREPLICAS (fewer replicas in sync than
// min-replicas-to-write asks) or MISCONF (a snapshot failed while
// stop-writes-on-bgsave-error is on): the last two, like READONLY, refuse
// a script at its first write, before anything was written. Nothing ran:
// trying again is safe.
func Refused(err error) bool {
	if !IsReply(err) {
		return false
	}
	for _, p := range refusals {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

var refusals = [...]string{"TRYAGAIN ", "MOVED ", "ASK ", "CLUSTERDOWN ", "MASTERDOWN ", "LOADING ", "READONLY ", "BUSY ", "OOM ", "NOREPLICAS ", "MISCONF "}

// stoppedPartWay reports whether err is Redis stopping a script at a
// command on a key that is not there in a slot being migrated (a key the
// script itself deleted: the key would be on the target): what the
// script wrote before it stays.
func stoppedPartWay(err error) bool {
	return IsReply(err) && strings.Contains(err.Error(), "attempted to access a non local key in a cluster node")
}

// partialError is a script Redis stopped part-way (stoppedPartWay): no
// reply that decides it, so its outcome is unknown, as after a lost reply
// (and settled as one is).
type partialError struct{ msg string }

func (e *partialError) Error() string { return "ran in part: " + e.msg }
func (e *partialError) Unwrap() error { return errs.OutcomeUnknown }

// Unreachable reports whether err says Redis could not be reached (no
// reply: refused, reset, timed out, pool exhausted), as opposed to a reply
// or an error of lockgen's own.
func Unreachable(err error) bool {
	if err == nil || IsReply(err) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errs.OutcomeUnknown) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
}
