package scripts

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Calls that return by their deadline on any client.
//
// go-redis honours a ctx on a socket read only when the client was built
// with ContextTimeoutEnabled; otherwise it reads with ReadTimeout alone
// (3 s), and a call stuck on a server that stopped answering outlives its
// deadline by that much. On such a client a call whose ctx has a deadline
// runs on a goroutine of its own, and its caller stops waiting at the
// deadline (or the call's bound, if later; a cancellation before then is
// waited out): the call is abandoned, not cancelled. It goes on to its
// reply or its read's timeout (go-redis resends nothing then), and the
// caller decides (Pending.Then) what is done with that outcome: a late
// reply is a real one. A caller that does not look sees a reply lost in
// transit. A client that honours deadlines runs every call inline.

// A Pending is one command run aside, pooled unless abandoned; once
// abandoned, its outcome is still to come (Then).
type Pending struct {
	ctx     context.Context
	rdb     Runner
	sc      Script // zero: args is a plain command (Do)
	numKeys int
	args    []any
	once    bool // sc.run's

	mu        sync.Mutex
	cmd       *redis.Cmd // the outcome, once it came
	abandoned bool
	then      func(*redis.Cmd)
	done      chan struct{} // cap 1: the outcome came while the caller waited
}

var pendingPool = sync.Pool{New: func() any { return &Pending{done: make(chan struct{}, 1)} }}

// Then has f called with the abandoned call's outcome when it comes, on
// the call's goroutine, or at once on a goroutine of its own if it came
// already. The outcome is a reply, a NotSent error, or a transport error
// after which no reply will ever come. Call it at most once.
func (p *Pending) Then(f func(cmd *redis.Cmd)) {
	p.mu.Lock()
	if cmd := p.cmd; cmd != nil {
		p.mu.Unlock()
		go f(cmd)
		return
	}
	p.then = f
	p.mu.Unlock()
}

// abandonedError is the error of a call its caller stopped waiting for.
type abandonedError struct {
	err error // the ctx's
	p   *Pending
}

func (e *abandonedError) Error() string {
	return "no reply by the end of the call (the command may still run): " + e.err.Error()
}

func (e *abandonedError) Unwrap() error { return e.err }

// Abandoned returns the outcome still to come of the call that failed
// with err because its caller stopped waiting for it, or nil when err is
// no such error. The outcome is unknown until then, as after a lost reply:
// NotSent and IsReply are false for err.
func Abandoned(err error) *Pending {
	var ae *abandonedError
	if errors.As(err, &ae) {
		return ae.p
	}
	return nil
}

// aside reports whether a call on ctx through rdb runs on a goroutine of
// its own: ctx has a deadline that rdb would not honour on a socket read.
func aside(ctx context.Context, rdb Runner) bool {
	if _, ok := ctx.Deadline(); !ok {
		return false
	}
	switch r := rdb.(type) {
	case *redis.Client:
		return !r.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return !r.Options().ContextTimeoutEnabled
	}
	return false
}

// callBound, as a ctx value (a time.Time: WithCallBound), is when the
// call a command is part of must return (a waiter's try: package await);
// detached work within it ends there too (package calls). A command whose
// ctx ends before that is abandoned only then: a reply on its way is
// worth having, as a client that waits for its reads would have it.
type callBound struct{}

// WithCallBound returns ctx carrying by as the bound of the call its
// commands are part of (see callBound).
func WithCallBound(ctx context.Context, by time.Time) context.Context {
	return context.WithValue(ctx, callBound{}, by)
}

// CallBoundOf returns the bound ctx carries (WithCallBound), if any.
func CallBoundOf(ctx context.Context) (time.Time, bool) {
	b, ok := ctx.Value(callBound{}).(time.Time)
	return b, ok
}

// runAside runs sc (zero: the plain command args) on a goroutine and
// returns its outcome, or an abandoned call's error once ctx ended and its
// patience ran out: at ctx's deadline, or at the call's bound if later
// (the goroutine keeps args).
func runAside(ctx context.Context, rdb Runner, sc Script, numKeys int, args []any, once bool) *redis.Cmd {
	if err := ctx.Err(); err != nil {
		// go-redis refuses a done ctx before it writes (its pool checks
		// it first): nothing is sent, and nothing is to be abandoned.
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(&notSentError{err})
		return cmd
	}
	p := pendingPool.Get().(*Pending)
	p.ctx, p.rdb, p.sc, p.numKeys, p.args, p.once = ctx, rdb, sc, numKeys, args, once
	go p.run()
	select {
	case <-p.done:
		return p.recycle()
	case <-ctx.Done():
	}
	patience, _ := ctx.Deadline()
	if b, ok := CallBoundOf(ctx); ok && b.After(patience) {
		patience = b
	}
	if wait := time.Until(patience); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-p.done:
			t.Stop()
			return p.recycle()
		case <-t.C:
		}
	}
	p.mu.Lock()
	if p.cmd != nil { // it came meanwhile
		p.mu.Unlock()
		<-p.done
		return p.recycle()
	}
	p.abandoned = true
	p.mu.Unlock()
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(&abandonedError{err: ctx.Err(), p: p})
	return cmd
}

func (p *Pending) run() {
	cmd := p.sc.run(p.ctx, p.rdb, p.numKeys, p.args, p.once)
	p.mu.Lock()
	p.cmd = cmd
	abandoned, then := p.abandoned, p.then
	p.mu.Unlock()
	switch {
	case !abandoned:
		p.done <- struct{}{} // the last touch: the caller recycles p
	case then != nil:
		then(cmd)
	}
}

// recycle returns p's outcome and puts p back in the pool.
func (p *Pending) recycle() *redis.Cmd {
	cmd := p.cmd
	p.ctx, p.rdb, p.sc, p.args, p.cmd = nil, nil, Script{}, nil, nil
	pendingPool.Put(p)
	return cmd
}

// Do sends a plain command (GET, PTTL, ...) that returns by ctx's
// deadline as Run does; its late outcome, if abandoned, is dropped unless
// the caller asks for it (Abandoned).
func Do(ctx context.Context, rdb Runner, args ...any) *redis.Cmd {
	return Script{}.send(ctx, rdb, 0, args, false)
}
