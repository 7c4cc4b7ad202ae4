package main

import (
	"slices"
	"time"
)

// dist is a sorted sample of durations.
type dist []time.Duration

func newDist(xs []time.Duration) dist {
	d := slices.Clone(xs)
	slices.Sort(d)
	return d
}

// q is the nearest-rank quantile (0 <= p <= 1); 0 for an empty sample.
func (d dist) q(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(p*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func (d dist) max() time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[len(d)-1]
}

func (d dist) mean() time.Duration {
	if len(d) == 0 {
		return 0
	}
	var s time.Duration
	for _, x := range d {
		s += x
	}
	return s / time.Duration(len(d))
}
