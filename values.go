package lockgen

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// minLease is the shortest fixed lease the runtime accepts.
const minLease = 10 * time.Millisecond

// duration reads a Go duration such as 30s or 1m30s. zero allows 0.
func (p *parser) duration(n *yaml.Node, path string, zero bool) (time.Duration, bool) {
	v, ok := p.scalar(n, path, "a duration such as 10s or 1m")
	if !ok {
		return 0, false
	}
	at := pos(deref(n))
	d, err := time.ParseDuration(v)
	if err != nil {
		if _, nerr := strconv.ParseFloat(v, 64); nerr == nil {
			p.add(at, path, "%q is not a duration (add a unit: %ss or %sms)", v, v, v)
		} else {
			p.add(at, path, "%q is not a duration (write a Go duration such as 10s, 1m or 1m30s)", v)
		}
		return 0, false
	}
	switch {
	case d < 0:
		p.add(at, path, "%s is negative (write a positive duration such as 10s)", v)
		return 0, false
	case d == 0 && !zero:
		p.add(at, path, "must be positive, got %s (write a duration such as 10s)", v)
		return 0, false
	}
	return d, true
}

// lease reads "watchdog" or a positive duration.
func (p *parser) lease(n *yaml.Node, path string) (Lease, bool) {
	v, ok := p.scalar(n, path, "watchdog or a duration such as 30s")
	if !ok {
		return Lease{}, false
	}
	at := pos(deref(n))
	if v == "watchdog" {
		return Lease{Watchdog: true}, true
	}
	if strings.EqualFold(v, "watchdog") || suggest(v, []string{"watchdog"}) != "" {
		p.add(at, path, "%q is not a lease (did you mean \"watchdog\"?)", v)
		return Lease{}, false
	}
	if d, err := time.ParseDuration(v); err == nil && d == 0 {
		p.add(at, path, "lease %s would expire at once (write watchdog to renew while held, or a duration such as 30s)", v)
		return Lease{}, false
	}
	d, ok := p.duration(n, path, false)
	if !ok {
		return Lease{}, false
	}
	if d < minLease {
		p.add(at, path, "lease %s is shorter than the runtime's minimum %s (write at least 10ms, or watchdog)", v, minLease)
		return Lease{}, false
	}
	return Lease{Fixed: d}, true
}

// wait reads "forever" or a duration >= 0 (0 = try once).
func (p *parser) wait(n *yaml.Node, path string) (Wait, bool) {
	v, ok := p.scalar(n, path, "forever, 0 or a duration such as 5s")
	if !ok {
		return Wait{}, false
	}
	if v == "forever" {
		return Wait{Forever: true}, true
	}
	if v == "0" {
		return Wait{}, true
	}
	if strings.EqualFold(v, "forever") || suggest(v, []string{"forever"}) != "" {
		p.add(pos(deref(n)), path, "%q is not a wait time (did you mean \"forever\"?)", v)
		return Wait{}, false
	}
	d, ok := p.duration(n, path, true)
	return Wait{D: d}, ok
}

// replicas reads syncReplicas: how many replicas must acknowledge an
// acquisition, 0 for none.
func (p *parser) replicas(n *yaml.Node, path string) (int, bool) {
	const fix = "write how many replicas must acknowledge each acquisition, e.g. 1; 0 waits for none"
	v, ok := p.scalar(n, path, "a number of replicas such as 1")
	if !ok {
		return 0, false
	}
	at := pos(deref(n))
	r, err := wholeNumber(v)
	switch {
	case err != nil:
		p.add(at, path, "%q is not a number of replicas (%s)", v, fix)
		return 0, false
	case r < 0:
		p.add(at, path, "%d is negative (%s)", r, fix)
		return 0, false
	case r > maxNumber:
		p.add(at, path, "%s is more than %s, the largest syncReplicas lockgen takes (%s)", v, maxNumberText, fix)
		return 0, false
	}
	return int(r), true
}

// boolean reads true or false; anything else is reported with want.
func (p *parser) boolean(n *yaml.Node, path, want string) bool {
	v, ok := p.scalar(n, path, want)
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	if deref(n).Tag != "!!bool" || err != nil {
		p.add(pos(deref(n)), path, "%q is not true or false (write %s)", v, want)
		return false
	}
	return b
}

// positive reads a whole number >= 1 (permits, count); fix says what to
// write instead.
func (p *parser) positive(n *yaml.Node, path, name, fix string) (int, bool) {
	v, ok := p.scalar(n, path, fix)
	if !ok {
		return 0, false
	}
	at := pos(deref(n))
	x, err := wholeNumber(v)
	switch {
	case err != nil:
		p.add(at, path, "%q is not a whole number (write %s)", v, fix)
		return 0, false
	case x < 1:
		p.add(at, path, "%s %d: must be at least 1 (write %s)", name, x, fix)
		return 0, false
	case x > maxNumber:
		p.add(at, path, "%s %s: must be at most %s (write %s)", name, v, maxNumberText, fix)
		return 0, false
	}
	return int(x), true
}

// maxNumber is the largest permits, count, quorum or syncReplicas a spec
// may set: 2^31-1, the largest int on every target (the generated code
// sets int fields with it, which a 32-bit build cannot hold past that).
const maxNumber = math.MaxInt32

const maxNumberText = "2147483647 (2^31-1)"

// wholeNumber reads a decimal whole number. One past the range of int64
// reads as the nearest bound, so that it is reported as too large (or
// negative) rather than as not a number.
func wholeNumber(v string) (int64, error) {
	x, err := strconv.ParseInt(v, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return x, nil
	}
	return x, err
}
