package runtime_test

import (
	"testing"

	"github.com/lockgen/lockgen/runtime"
)

// A count Redis holds but that is no int64 (out of range) is an error,
// and the count reported beside it is 0, not whatever parsing left.
func TestCountReadsReportZeroBesideAnError(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	for _, key := range []string{"plain-huge", "latch-huge"} {
		if err := rdb.Set(ctx, key, "99999999999999999999", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := c.PlainSemaphore("plain-huge", "").Available(ctx); err == nil || n != 0 {
		t.Errorf("PlainSemaphore.Available = %d, %v; want 0 and an error", n, err)
	}
	if n, err := c.Latch("latch-huge", runtime.LatchOptions{Count: 1}).Count(ctx); err == nil || n != 0 {
		t.Errorf("Latch.Count = %d, %v; want 0 and an error", n, err)
	}
}
