//go:build amd64 || arm64 || loong64 || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x

package holds

import (
	"testing"
	"unsafe"
)

// A renewal round reads and writes of each hold its flags, its lease
// term, its renewal entry, its order, key, field and slot: they stay in
// the first two cache lines, and the Hold in a size class of whole lines
// (320 bytes: its objects start on a line), so a round touches two lines
// of a hold, not three. The layout is for 64-bit words: the file builds
// only there.
func TestHoldKeepsWhatARoundReadsInTwoLines(t *testing.T) {
	var h Hold
	if size := unsafe.Sizeof(h); size != 320 {
		t.Errorf("a Hold takes %d bytes, want 320 (a size class of whole cache lines)", size)
	}
	for name, end := range map[string]uintptr{
		"flags": unsafe.Offsetof(h.queued) + unsafe.Sizeof(h.queued),
		"lease": unsafe.Offsetof(h.lease) + unsafe.Sizeof(h.lease),
		"renew": unsafe.Offsetof(h.renew) + unsafe.Sizeof(h.renew),
		"seq":   unsafe.Offsetof(h.seq) + unsafe.Sizeof(h.seq),
		"Key":   unsafe.Offsetof(h.Key) + unsafe.Sizeof(h.Key),
		"Field": unsafe.Offsetof(h.Field) + unsafe.Sizeof(h.Field),
		"Slot":  unsafe.Offsetof(h.Slot) + unsafe.Sizeof(h.Slot),
	} {
		if end > 128 {
			t.Errorf("%s ends at byte %d of a Hold, past its first two cache lines", name, end)
		}
	}
}
