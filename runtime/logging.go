package runtime

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// A library that writes to the process's default logger on its own speaks
// in every test and every service that merely creates a Client. So a
// Client without Options.Logger logs to slog.Default() at Debug level
// only (off unless the program turned debug logging on), and a Client
// with one logs its warnings there as they are.
//
// Warnings of one kind (a failed renewal round, a lost hold, a failed
// release) come in bursts when Redis is down: one per hold or per call.
// Each kind is written at most once per logInterval; the next one says how
// many were left out.

// logInterval is the least time between two warnings of one kind.
const logInterval = 10 * time.Second

// debugOnly is a handler that passes every record on at Debug level.
type debugOnly struct{ h slog.Handler }

func (d debugOnly) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugOnly) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugOnly) WithAttrs(as []slog.Attr) slog.Handler { return debugOnly{d.h.WithAttrs(as)} }
func (d debugOnly) WithGroup(name string) slog.Handler    { return debugOnly{d.h.WithGroup(name)} }

// newLogger is the Client's logger: opts' own, or the default one at
// Debug level.
func newLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.New(debugOnly{slog.Default().Handler()})
	}
	return l.With("component", "lockgen")
}

// warnings rate-limits warnings by kind (their message).
type warnings struct {
	mu   sync.Mutex
	last map[string]warned
}

type warned struct {
	at      time.Time
	dropped int
}

// warn writes msg at Warn level unless a warning with the same message
// was written less than logInterval ago; then it only counts it.
func (w *warnings) warn(log *slog.Logger, msg string, args ...any) {
	now := time.Now()
	w.mu.Lock()
	if w.last == nil {
		w.last = make(map[string]warned)
	}
	prev, seen := w.last[msg]
	if seen && now.Sub(prev.at) < logInterval {
		prev.dropped++
		w.last[msg] = prev
		w.mu.Unlock()
		return
	}
	w.last[msg] = warned{at: now}
	w.mu.Unlock()
	if prev.dropped > 0 {
		args = append(args, "more since the last such warning", prev.dropped)
	}
	log.Warn(msg, args...)
}
