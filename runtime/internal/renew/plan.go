package renew

// A Unit is what one item brings to a call: its keys and their slot.
type Unit struct{ Keys, Slot int }

// Batches cuts items into batches of at most maxKeys keys (an item with
// more has its own); with bySlot the items are sorted by slot and a batch
// is of one slot, as a script's keys must be.
func Batches[T any](items []T, unit func(T) Unit, bySlot bool, maxKeys int) [][]T {
	var batches [][]T
	for start := 0; start < len(items); {
		first := unit(items[start])
		keys, end := first.Keys, start+1
		for ; end < len(items); end++ {
			u := unit(items[end])
			if bySlot && u.Slot != first.Slot || keys+u.Keys > maxKeys {
				break
			}
			keys += u.Keys
		}
		batches = append(batches, items[start:end])
		start = end
	}
	return batches
}

// Calls groups batches into pipelines of at most per; with bySlot a call
// serves one slot, so it goes to one node, whose own workers send it (the
// watchdog's lanes): a slow node holds up only its own holds.
func Calls[T any](batches [][]T, unit func(T) Unit, bySlot bool, per int) [][][]T {
	var calls [][][]T
	for len(batches) > 0 {
		n := 1
		for n < min(per, len(batches)) && (!bySlot || unit(batches[n][0]).Slot == unit(batches[0][0]).Slot) {
			n++
		}
		calls = append(calls, batches[:n])
		batches = batches[n:]
	}
	return calls
}
