package templates

import "github.com/dave/jennifer/jen"

// Fair emits a fair lock: as Reentrant, but the handle comes from
// runtime.Client.FairLock and the options carry the queue timeout.
func Fair(l *Lock) jen.Code {
	return exclusive{
		kind:    "fair lock",
		ctor:    "FairLock",
		about:   []string{"Waiters get the lock in the order they asked for it."},
		config:  []string{configLine("fairness", "queueTimeout "+l.QueueTimeout.String()+" (a queued waiter silent that long is skipped)")},
		options: []jen.Code{option("QueueTimeout", durationCode(l.QueueTimeout))},
	}.emit(l)
}
