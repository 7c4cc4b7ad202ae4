package lockgen

import (
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
)

// TestTagIsWhatRedisHashes checks the hash-tag rule the atomic proof
// relies on: the first {, the first } after it, and the whole key when
// there is no tag or the first one is empty.
func TestTagIsWhatRedisHashes(t *testing.T) {
	for text, want := range map[string]string{
		"order:${id}":            "order:${id}",
		"order:{${id}}":          "{${id}}",
		"{a}:{b}":                "{a}",
		"a:{}:{b}":               "a:{}:{b}",
		"x:{${tenant}:${day}}:y": "{${tenant}:${day}}",
	} {
		segs, probs := parsePattern(text, true)
		// parsePattern refuses an empty tag, but hashed must still read
		// one as Redis does.
		if len(probs) > 0 && !strings.HasPrefix(probs[0].msg, "empty hash tag") {
			t.Fatalf("%s: %v", text, probs)
		}
		if got := (Pattern{Text: text, Segments: segs}).hashed(); got != want {
			t.Errorf("hashed(%q) = %q, want %q", text, got, want)
		}
	}
}

// TestAtomicMultiLockMembersShareASlot renders the member keys of every
// atomic multi lock in the golden cases for many param values, and checks
// with Redis's own slot function that they always land in one slot.
func TestAtomicMultiLockMembersShareASlot(t *testing.T) {
	src, err := os.ReadFile("testdata/multi_atomic/locks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := Parse("locks.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, l := range spec.Locks {
		if l.Kind != Multi || !l.Atomic {
			continue
		}
		for i := range 200 {
			slot := -1
			for _, m := range l.leaves {
				key := renderKey(m.key(), func(param string) string { return fmt.Sprint(param, "-", i*7919%1000) })
				if s := keySlot(key); slot >= 0 && s != slot {
					t.Fatalf("%s: %s is in slot %d, an earlier member in %d", l.Name, key, s, slot)
				} else {
					slot = s
				}
			}
		}
		checked++
	}
	if checked < 2 {
		t.Fatalf("checked %d atomic multi locks, want the 2 of testdata/multi_atomic", checked)
	}
}

// renderKey fills the placeholders of p with value(param).
func renderKey(p Pattern, value func(param string) string) string {
	var b strings.Builder
	for _, s := range p.Segments {
		if s.Param != "" {
			b.WriteString(value(s.Param))
		} else {
			b.WriteString(s.Lit)
		}
	}
	return b.String()
}

// keySlot is Redis Cluster's HASH_SLOT: CRC16 (XMODEM) of the hash tag,
// or of the whole key, mod 16384.
func keySlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// A slot whose text follows a literal $ in the key must still become a
// hash tag around that text. withSlot used to insert "{" after the $ and
// re-parse the text, which read "${x}" as an (undeclared) placeholder: the
// tag and the literal x vanished, A rendered exactly B's keys, and the
// key-space check, which gives up on undeclared params, let it pass.
func TestSlotAfterLiteralDollarKeepsTagAndText(t *testing.T) {
	src := "version: 1\npackage: locks\nlocks:\n" +
		"  A:\n    key: \"a$x:${id}\"\n    params: {id: int64}\n    slot: \"x\"\n" +
		"  B:\n    key: \"a:${id}\"\n    params: {id: int64}\n" +
		"  C:\n    key: \"c$${t}\"\n    params: {t: string}\n    slot: \"${t}\"\n"
	s, err := Parse("locks.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	value := func(p string) string { return "<" + p + ">" }
	for name, want := range map[string]string{"A": "a${x}:<id>", "C": "c${<t>}"} {
		got := renderKey(s.Lock(name).key(), value)
		if got != want {
			t.Errorf("%s renders %q, want %q (segments %+v)", name, got, want, s.Lock(name).key().Segments)
		}
	}
}

// TestSlotPropertyKeepsKeyAndAddsOneTag checks withSlot over random keys
// and slots: the rendered key holds exactly one hash tag whose content is
// the rendered slot, and without the braces it is the rendered key, with
// "slot:" in front when the slot was put before it.
func TestSlotPropertyKeepsKeyAndAddsOneTag(t *testing.T) {
	alpha := []string{"a", ":", "$", "x", "${t}", "${id}", "-", "%"}
	r := rand.New(rand.NewSource(1))
	value := func(p string) string { return "<" + p + ">" }
	bad := 0
	for i := 0; i < 3000 && bad < 5; i++ {
		var k, sl strings.Builder
		for range 1 + r.Intn(6) {
			k.WriteString(alpha[r.Intn(len(alpha))])
		}
		for range 1 + r.Intn(3) {
			sl.WriteString(alpha[r.Intn(len(alpha))])
		}
		src := "version: 1\npackage: locks\nlocks:\n  A:\n    key: '" + k.String() + "'\n    params: {t: string, id: int64}\n    slot: '" + sl.String() + "'\n"
		spec, err := Parse("locks.yaml", []byte(src))
		if err != nil {
			continue
		}
		l := spec.Locks[0]
		key, slot := renderKey(l.Key, value), renderKey(l.Slot, value)
		got := renderKey(l.key(), value)
		open, end := strings.IndexByte(got, '{'), strings.IndexByte(got, '}')
		ok := strings.Count(got, "{") == 1 && strings.Count(got, "}") == 1 && open < end
		if ok {
			bare := got[:open] + got[open+1:end] + got[end+1:]
			ok = got[open+1:end] == slot && (bare == key || bare == slot+":"+key)
		}
		if !ok {
			bad++
			t.Errorf("key %q slot %q renders %q", k.String(), sl.String(), got)
		}
	}
}
