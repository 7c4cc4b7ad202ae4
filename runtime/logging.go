package runtime

import (
	"context"
	"log/slog"
)

// A library that writes to the process's default logger on its own speaks
// in every test and every service that merely creates a Client. So a
// Client without Options.Logger logs to slog.Default() at Debug level
// only (off unless the program turned debug logging on), and a Client
// with one logs its warnings there as they are.
// Warnings of one kind are rate-limited (lockenv.Env.Warn).

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
