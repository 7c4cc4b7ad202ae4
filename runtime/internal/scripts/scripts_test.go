package scripts_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// The values of Redis' CLUSTER KEYSLOT documentation, and the hash-tag
// rules.
func TestKeySlotIsRedisHashSlot(t *testing.T) {
	for key, want := range map[string]int{
		"":                  0,
		"123456789":         12739, // CRC16/XMODEM check value 0x31C3
		"somekey":           11058,
		"foo{hash_tag}":     2515,
		"bar{hash_tag}":     2515,
		"{user1000}.a":      scripts.KeySlot("user1000"),
		"{order:42}:x":      scripts.KeySlot("order:42"),
		"x{order:42}{y}":    scripts.KeySlot("order:42"), // the first tag counts
		"lockgen_latch:{k}": scripts.KeySlot("k"),
	} {
		if got := scripts.KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
	// An empty tag is no tag: the whole key is hashed, not "".
	if scripts.KeySlot("{}foo") == scripts.KeySlot("") {
		t.Error(`KeySlot("{}foo") hashed the empty tag`)
	}
}

// Run loads a script the server has forgotten and sends it again; the
// reply is the script's.
func TestRunSurvivesAFlushedScriptCache(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	for i := range 3 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		set, err := scripts.LatchTrySet.Run(ctx, rdb, 2, []any{scripts.Header: "latch", "channel", "1", "publish"}).Int64()
		if err != nil {
			t.Fatalf("run %d after SCRIPT FLUSH: %v", i, err)
		}
		if want := int64(min(i, 1) ^ 1); set != want {
			t.Fatalf("run %d: %d, want %d (only the first run sets the latch)", i, set, want)
		}
	}
}

// Eval (the fallback when a forgotten script cannot be loaded) takes the
// arguments as EVALSHA does: the watchdog passes keys and fields as
// pointers to a hold's own strings (a key that was a *string panicked
// here: a CI run, a server restarting under a renewal call).
func TestEvalTakesKeysAsStringPointers(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	key, field := "renew:k", "owner:1"
	if err := rdb.HSet(ctx, key, field, 1).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, key, time.Second)
	args := []any{scripts.Header: &key, "30000", "", &field}
	res, err := scripts.RenewBatch.Eval(ctx, rdb, 1, args).Text()
	if err != nil || res != "1" {
		t.Fatalf("EVAL of a renewal with *string key and field: %q, %v; want \"1\"", res, err)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= time.Second {
		t.Fatalf("the key has TTL %v after its renewal to 30s", ttl)
	}
}

// On a cluster, a script the key's master has forgotten (a promoted
// replica never had it: script caches are not replicated) is loaded on
// that master only: no other node is asked, so a dead one (the master the
// replica replaced) is not in the call's path.
func TestRunLoadsAForgottenScriptOnTheKeysMaster(t *testing.T) {
	cl := redistest.StartCluster(t)
	rdb := cl.Client(t)
	ctx := context.Background()
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	keys := []any{scripts.Header: "latch:{a}", "channel:{a}", "1", "publish"}
	if _, err := scripts.LatchTrySet.Run(ctx, rdb, 2, keys).Int64(); err != nil {
		t.Fatal(err)
	}
	owner := cl.MasterForKey("latch:{a}")
	for _, s := range cl.Nodes() {
		ok, err := s.Client(t).ScriptExists(ctx, lua.LatchTrySet.Hash()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := s == owner; ok[0] != want {
			t.Errorf("%s has the script: %v, want %v (the key's master is %s)", s, ok[0], want, owner)
		}
	}
}

// A call that never reached a connection is known not to have been sent;
// a reply is a reply; a call that was written and lost its reply is
// neither.
func TestNotSentOnlyForCallsThatNeverLeft(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()

	closed := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	_ = closed.Close()
	err := scripts.Acquire.Run(ctx, closed, 2, []any{scripts.Header: "k", "m", 1000, "o", 0, 1000}).Err()
	if err == nil || !scripts.NotSent(err) || scripts.IsReply(err) {
		t.Fatalf("a call on a closed client: %v, NotSent %v, want a not-sent error", err, scripts.NotSent(err))
	}

	rdb := srv.Client(t)
	if err := rdb.Set(ctx, "k", "a string", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err = scripts.Acquire.Run(ctx, rdb, 2, []any{scripts.Header: "k", "m", 1000, "o", 0, 1000}).Err()
	if err == nil || !scripts.IsReply(err) || scripts.NotSent(err) {
		t.Fatalf("WRONGTYPE: %v, IsReply %v, want a reply", err, scripts.IsReply(err))
	}

	// A paused server reads the command and never answers: sent, with no
	// reply.
	slow := pausedServer(t, srv)
	err = scripts.LatchDelete.Run(ctx, slow, 2, []any{scripts.Header: "latch", "channel", "publish"}).Err()
	if err == nil || scripts.NotSent(err) || scripts.IsReply(err) {
		t.Fatalf("a call the paused server read: %v, NotSent %v, want neither sent-proof nor reply", err, scripts.NotSent(err))
	}
}

// A call sent once whose reply was lost may have run: its error wraps
// errs.OutcomeUnknown. One refused (a reply) or never sent (a closed
// client, a done ctx) does not.
func TestRunOnceReportsOnlyALostReplyAsAnUnknownOutcome(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	del := func(ctx context.Context, rdb scripts.Runner) error {
		return scripts.LatchCountDown.RunOnce(ctx, rdb, 2, []any{scripts.Header: "latch", "channel", "publish"}).Err()
	}
	rdb := srv.Client(t)
	closed := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	_ = closed.Close()
	done, cancel := context.WithCancel(ctx)
	cancel()
	cte := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cte.Close() })
	if err := rdb.Set(ctx, "latch", "a string", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"a reply (not an integer)":       del(ctx, rdb),
		"a closed client":                del(ctx, closed),
		"a done ctx":                     del(done, rdb),
		"a done ctx, deadlines honoured": del(done, cte),
	} {
		if err == nil || errors.Is(err, errs.OutcomeUnknown) {
			t.Errorf("%s: %v, want an error that is not an unknown outcome", name, err)
		}
	}

	slow := pausedServer(t, srv)
	if err := del(ctx, slow); !errors.Is(err, errs.OutcomeUnknown) || !scripts.Unreachable(err) {
		t.Fatalf("a call the paused server read: %v, want an unknown outcome", err)
	}
}

// pausedServer returns a client of srv that has connected, and pauses srv
// for a second (CLIENT PAUSE ALL): it reads commands and answers none,
// and the client gives up on a reply after 200 ms.
func pausedServer(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	ctx := context.Background()
	slow := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = slow.Close() })
	if err := slow.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client(t).Do(ctx, "client", "pause", 1000, "all").Err(); err != nil {
		t.Fatal(err)
	}
	return slow
}

// noRetryHook records, for each script command sent, its name and whether
// go-redis may resend it; with noscript, it answers every EVALSHA with
// NOSCRIPT itself, so that Run falls back to EVAL.
type noRetryHook struct {
	noscript bool
	sent     []string
}

func (h *noRetryHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *noRetryHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *noRetryHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" || n == "script" {
			h.sent = append(h.sent, fmt.Sprintf("%s once=%v", n, cmd.NoRetry()))
		}
		if h.noscript && cmd.Name() == "evalsha" {
			var err error = noscriptError{}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// noscriptError is Redis' reply to EVALSHA of a script it does not have.
type noscriptError struct{}

func (noscriptError) Error() string { return "NOSCRIPT No matching script. Please use EVAL." }
func (noscriptError) RedisError()   {}

// RunOnce sends the script without go-redis' retries however it sends it:
// EVALSHA, and EVAL when the script cannot be had by its SHA-1; a reload
// (the script did not run) is not a resend.
func TestRunOnceSendsEveryCopyWithoutRetries(t *testing.T) {
	for _, noscript := range []bool{false, true} {
		t.Run(fmt.Sprintf("noscript=%v", noscript), func(t *testing.T) {
			rdb := redistest.Start(t).Client(t)
			h := &noRetryHook{noscript: noscript}
			rdb.AddHook(h)
			ctx := context.Background()
			set, err := scripts.LatchTrySet.RunOnce(ctx, rdb, 2, []any{scripts.Header: "latch", "channel", "1", "publish"}).Int64()
			if err != nil || set != 1 {
				t.Fatalf("RunOnce = %d, %v; want 1 (set)", set, err)
			}
			// A fresh server has no scripts: NOSCRIPT, load, send again.
			want := []string{"evalsha once=true", "script once=false", "evalsha once=true"}
			if noscript {
				want = append(want, "eval once=true")
			}
			if !slices.Equal(h.sent, want) {
				t.Errorf("sent %q, want %q", h.sent, want)
			}
			if n, _ := rdb.Get(ctx, "latch").Int(); n != 1 {
				t.Errorf("latch count %d, want 1", n)
			}
		})
	}
}

// On a client that reads its sockets with ReadTimeout alone (go-redis'
// default options), a call returns by its ctx's deadline all the same
// (before the server, paused longer, answers): it is abandoned, its outcome unknown (neither a reply nor "not sent"), and
// the reply that comes later, from a server that was only slow, is handed
// to the caller's Then. A call answered in time is not abandoned.
func TestCallsAbandonedAtTheirDeadlineHandOnTheirLateReply(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // ContextTimeoutEnabled off, ReadTimeout 3s
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Set(ctx, "latch", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(context.Context) *redis.Cmd{
		"script": func(ctx context.Context) *redis.Cmd {
			return scripts.LatchDelete.Run(ctx, rdb, 2, []any{scripts.Header: "latch", "channel", "publish"})
		},
		"command": func(ctx context.Context) *redis.Cmd { return scripts.Do(ctx, rdb, "exists", "latch") },
	}
	for name, call := range calls {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		if err := call(cctx).Err(); err != nil {
			t.Fatalf("%s answered in time: %v", name, err)
		}
		cancel()
	}
	if err := srv.Client(t).Do(ctx, "client", "pause", 600, "all").Err(); err != nil {
		t.Fatal(err)
	}
	late := make(chan string, len(calls))
	for name, call := range calls {
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := call(cctx).Err()
		cancel()
		p := scripts.Abandoned(err)
		if p == nil || !errors.Is(err, context.DeadlineExceeded) || scripts.NotSent(err) || scripts.IsReply(err) {
			t.Fatalf("%s on a paused server: %v, want an abandoned call, outcome unknown", name, err)
		}
		p.Then(func(cmd *redis.Cmd) { late <- fmt.Sprintf("%s: %v %v", name, cmd.Val(), cmd.Err()) })
	}
	for range calls {
		select {
		case got := <-late:
			if !strings.HasSuffix(got, " <nil>") {
				t.Errorf("late outcome %s, want a reply", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no late outcome 5 s after the pause")
		}
	}
}

// A call aside is abandoned at its deadline, not before: one whose ctx is
// cancelled first, or whose ctx ends before the call it is part of must
// return (CallBound), waits for a reply on its way, as a client that waits
// for its reads would.
func TestCallsAsideWaitForTheirReplyUntilTheirBound(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // ContextTimeoutEnabled off
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cancelled := func() (context.Context, context.CancelFunc) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		time.AfterFunc(50*time.Millisecond, cancel)
		return cctx, cancel
	}
	bounded := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(scripts.WithCallBound(ctx, time.Now().Add(time.Minute)), 50*time.Millisecond)
	}
	for name, mk := range map[string]func() (context.Context, context.CancelFunc){"cancelled": cancelled, "bounded": bounded} {
		if err := srv.Client(t).Do(ctx, "client", "pause", 300, "all").Err(); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := mk()
		n, err := scripts.Do(cctx, rdb, "exists", "k").Int64()
		cancel()
		if err != nil || n != 0 {
			t.Errorf("%s: %d, %v; want the reply after the pause", name, n, err)
		}
	}
}
