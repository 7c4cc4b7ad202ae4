package templates

import (
	"strconv"
	"time"

	"github.com/dave/jennifer/jen"
)

// durationCode renders d as a readable constant expression, e.g.
// 90 * time.Second, in the largest unit that divides it.
func durationCode(d time.Duration) jen.Code {
	units := []struct {
		d    time.Duration
		name string
	}{
		{time.Hour, "Hour"}, {time.Minute, "Minute"}, {time.Second, "Second"},
		{time.Millisecond, "Millisecond"}, {time.Microsecond, "Microsecond"},
	}
	for _, u := range units {
		if d%u.d == 0 {
			if d == u.d {
				return jen.Qual("time", u.name)
			}
			return jen.Id(strconv.FormatInt(int64(d/u.d), 10)).Op("*").Qual("time", u.name)
		}
	}
	return jen.Qual("time", "Duration").Call(jen.Id(strconv.FormatInt(int64(d), 10)))
}

func leaseCode(d time.Duration) jen.Code {
	if d == 0 {
		return jen.Qual(runtimePkg, "Watchdog")
	}
	return durationCode(d)
}

func waitCode(d time.Duration) jen.Code {
	switch {
	case d < 0:
		return jen.Qual(runtimePkg, "Forever")
	case d == 0:
		return jen.Lit(0)
	}
	return durationCode(d)
}

func leaseText(d time.Duration) string {
	if d == 0 {
		return "watchdog (renewed while held)"
	}
	return d.String() + " (fixed, never renewed)"
}

func waitText(d time.Duration) string {
	switch {
	case d < 0:
		return "forever (until ctx is done)"
	case d == 0:
		return "0 (one try)"
	}
	return d.String()
}
