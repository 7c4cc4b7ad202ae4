package robustness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// reportHistory has an overlap on re:0, ops on other keys, and faults.
func reportHistory() *synth {
	s := newSynth(3)
	s.hold(0, KindReentrant, "re:0", 0, 10, 100).synWrite(20, 30, 0, OutOK)
	s.hold(1, KindReentrant, "re:0", 5, 60, 200).synWrite(70, 80, 1, OutOK)
	s.op(2, KindReentrant, FAcquire, "re:1", 50, 55, OutFail, 0)
	s.op(2, KindReentrant, FAcquire, "re:0", 5_000, 5_010, OutUnknown, 0)
	s.latch(2, FSetCount, 0, 5, OutOK, 3)
	s.latch(2, FCount, 6, -1, OutUnknown, 0)
	s.fault(FaultBlackhole, "p0", 40, 90)
	s.fault(FaultFlush, "lock", 3_000, 3_001)
	return s
}

func TestReport(t *testing.T) {
	h := reportHistory().build()
	results := CheckAll(h, synLimits(), t.TempDir())
	var names []string
	for _, r := range results {
		names = append(names, r.Check)
	}
	if got := strings.Join(names, ","); got != "exclusion,writes,fencing,linearizability,liveness" {
		t.Fatalf("CheckAll ran %s", got)
	}
	var b strings.Builder
	Report(&b, h, results)
	out := b.String()
	squash := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, want := range []string{
		"seed 7, run 100000.0ms long (3 processes, 6 ops), healed at 3001.0ms",
		"reentrant  acquire   2     1        1               0",
		"latch    set-count   1     0        0               0",
		"latch        count   0     0        0               1",
		"blackhole      1  50.0ms",
		"flushall       1   1.0ms",
		"exclusion checked 2 violations 1 FAIL",
		"linearizability checked 1 violations 0 PASS",
		"VIOLATION exclusion: key re:0",
		"  linearizability: 1 ops left out",
	} {
		if !strings.Contains(squash(out), squash(want)) {
			t.Errorf("report does not say %q:\n%s", want, out)
		}
	}
}

func TestReportWindow(t *testing.T) {
	s := reportHistory()
	h := s.build()
	r := CheckExclusion(h, synLimits())
	if len(r.Violations) != 1 {
		t.Fatalf("violations %v", r.Violations)
	}
	var b strings.Builder
	Window(&b, h, r.Violations[0], 20*time.Millisecond)
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		"window 40.0ms..120.0ms, keys re:0:",
		"* 0.0ms..10.0ms  p0/op1 reentrant acquire re:0 n=1 -> ok; release 100.0ms..101.0ms; write 20.0ms..30.0ms read 0 ok",
		"* 5.0ms..60.0ms  p1/op1 reentrant acquire re:0 n=1 -> ok; release 200.0ms..201.0ms; write 70.0ms..80.0ms read 1 ok",
		"40.0ms..90.0ms  fault blackhole on p0",
	}
	if len(lines) != len(want) {
		t.Fatalf("window:\n%s\nwant %d lines", out, len(want))
	}
	for i, w := range want {
		if strings.TrimSpace(lines[i]) != w {
			t.Errorf("line %d: %q, want %q", i, strings.TrimSpace(lines[i]), w)
		}
	}
}

func TestReportArtifacts(t *testing.T) {
	runDir, dir := t.TempDir(), t.TempDir()
	s := reportHistory()
	s.latch(0, FCount, 20, 25, OutOK, 2) // not linearizable: no count-down
	h := s.build()
	results := CheckAll(h, synLimits(), runDir)
	paths, err := WriteArtifacts(dir, h, results)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"history.json", "report.txt", "linear-latch-latch.html"}
	if len(paths) != len(want) {
		t.Fatalf("paths %v, want %v", paths, want)
	}
	for i, w := range want {
		if paths[i] != filepath.Join(dir, w) {
			t.Errorf("path %d: %s, want %s in %s", i, paths[i], w, dir)
		}
		if _, err := os.Stat(paths[i]); err != nil {
			t.Error(err)
		}
	}
	back, err := ReadHistory(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Ops) != len(h.Ops) || back.Ops[0].ReleaseInvoke != h.Ops[0].ReleaseInvoke || back.Finish != h.Finish {
		t.Errorf("history.json does not round-trip")
	}
	// The checkers judge the history read back as the original.
	again := CheckAll(back, synLimits(), "")
	for i := range results {
		if len(again[i].Violations) != len(results[i].Violations) {
			t.Errorf("%s: %d violations on the history read back, %d on the original", results[i].Check, len(again[i].Violations), len(results[i].Violations))
		}
	}
	report, _ := os.ReadFile(paths[1])
	if !strings.Contains(string(report), "window ") {
		t.Errorf("report.txt has no window:\n%s", report)
	}
}
