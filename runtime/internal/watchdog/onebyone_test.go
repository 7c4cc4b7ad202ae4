package watchdog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/holds"
)

// oneByOne's replies line up with their holds when several batches of
// different sizes are split in one pipeline, around batches that are kept
// (one that succeeded, one of a single hold, which is not split).
func TestOneByOneMatchesRepliesToHolds(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var hs []*holds.Hold
	present := map[*holds.Hold]bool{}
	for i := range 9 {
		key := fmt.Sprintf("k%d", i)
		hctx := f.hold(t, key, "o")
		h := f.reg.Of(hctx).Acquisition().Hold()
		if i%3 == 1 { // field gone: its renewal replies '0'
			f.rdb.HDel(ctx, key, "o")
		} else {
			present[h] = true
		}
		hs = append(hs, h)
	}
	due := func(hs ...*holds.Hold) []holds.Due {
		var d []holds.Due
		for _, h := range hs {
			d = append(d, holds.Due{H: h, Valid: time.Now().Add(time.Hour).UnixNano()})
		}
		return d
	}
	batches := [][]holds.Due{due(hs[0], hs[1]), due(hs[2]), due(hs[3], hs[4], hs[5], hs[6]), due(hs[7]), due(hs[8], hs[1], hs[4])}
	cmds := make([]*redis.Cmd, len(batches))
	for i := range cmds {
		cmds[i] = redis.NewCmd(ctx)
	}
	var try error = replyErr("TRYAGAIN Multiple keys request during rehashing of slot")
	cmds[0].SetErr(try)
	cmds[1].SetVal("1")
	cmds[2].SetErr(try)
	cmds[3].SetErr(try) // one hold: not split
	cmds[4].SetErr(try)
	outB, outC := f.wd.oneByOne(ctx, batches, cmds)
	if len(outB) != len(outC) || len(outB) != 2+1+4+1+3 {
		t.Fatalf("%d batches, %d replies", len(outB), len(outC))
	}
	for i, b := range outB {
		if i == 2 || i == 7 {
			continue
		}
		if len(b) != 1 {
			t.Fatalf("batch %d: %d holds", i, len(b))
		}
		res, err := outC[i].Text()
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if want := map[bool]string{true: "1", false: "0"}[present[b[0].H]]; res != want {
			t.Errorf("batch %d (%s): reply %q, want %q", i, b[0].H.Key, res, want)
		}
	}
	if !errors.Is(outC[7].Err(), try) || outB[7][0].H != hs[7] || outB[2][0].H != hs[2] {
		t.Error("kept batches moved")
	}
}

type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}
