package lockenv

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/errs"
)

// Owner tokens and request ids start with the Client's id and never
// repeat; the watchdog's lease is boxed once and other leases are sent in
// milliseconds.
func TestEnvOwnerTokensAndLeaseArgs(t *testing.T) {
	e := &Env{ID: "c0ffee", Watchdog: 30 * time.Second}
	e.Init()
	if a, b := e.NewOwner(), e.NewOwner(); a != "c0ffee:1" || b != "c0ffee:2" {
		t.Errorf("owners %q %q, want c0ffee:1 c0ffee:2", a, b)
	}
	if a, b := e.NewRequestID(), e.NewRequestID(); a == b || !strings.HasPrefix(a, "c0ffee:r") {
		t.Errorf("request ids %q %q: want distinct ids after c0ffee:r", a, b)
	}
	if got := e.LeaseArg(30 * time.Second); got != "30000" {
		t.Errorf("LeaseArg(watchdog) = %v, want 30000", got)
	}
	if got := e.LeaseArg(1500 * time.Millisecond); got != "1500" {
		t.Errorf("LeaseArg(1.5s) = %v, want 1500", got)
	}
	if e.GiveBackFor() != time.Minute {
		t.Errorf("GiveBackFor = %v, want two watchdog leases", e.GiveBackFor())
	}
}

// Keys are refused before any round trip when empty or with a brace that
// opens no hash tag; leases when negative or too short to be useful.
func TestValidate(t *testing.T) {
	for _, c := range []struct {
		key   string
		lease time.Duration
		want  error
	}{
		{"order:1", Watchdog, nil},
		{"{tenant}:order", time.Second, nil},
		{"", Watchdog, errs.InvalidKey},
		{"order:{", Watchdog, errs.InvalidKey},
		{"order:{}", Watchdog, errs.InvalidKey},
		{"order:1", -time.Second, errs.InvalidLease},
		{"order:1", MinLease / 2, errs.InvalidLease},
	} {
		if err := Validate(c.key, c.lease); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("Validate(%q, %v) = %v, want %v", c.key, c.lease, err, c.want)
		}
	}
}

// Warnings are rate-limited by kind, and a warning about one node is not
// of the same kind as the same warning about another: a second master
// whose renewals run behind is said at once, not 10 s later.
func TestWarnIsRateLimitedPerMessageAndNode(t *testing.T) {
	var b strings.Builder
	e := &Env{Log: slog.New(slog.NewTextHandler(&b, nil))}
	e.Warn("behind", "node", "a:1", "backlog", 1)
	e.Warn("behind", "node", "b:2", "backlog", 2)
	e.Warn("behind", "node", "a:1", "backlog", 3) // within 10 s of a's first: left out
	e.Warn("other")
	e.Warn("other")
	out := b.String()
	for _, want := range []string{"node=a:1 backlog=1", "node=b:2 backlog=2"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "backlog=3") || strings.Count(out, "msg=other") != 1 {
		t.Errorf("a repeat within the interval was written:\n%s", out)
	}
}
