package main

// extraKinds are lockgen's other lock kinds (scenario 6), added as they
// land in runtime/.
func extraKinds(version string) []*lib { return nil }
