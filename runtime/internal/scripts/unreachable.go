package scripts

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/errs"
)

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
