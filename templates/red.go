package templates

import (
	"strconv"

	"github.com/dave/jennifer/jen"
)

// Red emits a RedLock: as Reentrant, but the handle is a *runtime.RedLock
// from runtime.Client.RedLock, held on a quorum of the client's
// Options.RedLockNodes, and the options carry the quorum.
func Red(l *Lock) jen.Code {
	quorum, nodes := "a majority of them", "majority"
	var options []jen.Code
	if l.Quorum > 0 {
		quorum, nodes = strconv.Itoa(l.Quorum)+" of them", strconv.Itoa(l.Quorum)
		options = append(options, option("Quorum", jen.Lit(l.Quorum)))
	}
	return exclusive{
		kind:    "RedLock",
		ctor:    "RedLock",
		handle:  "RedLock",
		methods: "Lock, TryLock and Unlock",
		about: []string{
			"The lock spans the independent Redis masters of the client's",
			"Options.RedLockNodes, not the Redis the client was built on: it is",
			"held while " + quorum + " grant it, and lost when fewer still do.",
		},
		config:  []string{configLine("quorum", nodes+" of Options.RedLockNodes")},
		options: options,
	}.emit(l)
}
