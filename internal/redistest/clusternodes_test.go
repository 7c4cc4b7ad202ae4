package redistest

import (
	"strings"
	"testing"
)

func TestParseClusterNodesReadsRolesSlotsAndFailures(t *testing.T) {
	const text = `
07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected
67ed 127.0.0.1:30002@40002,host.example master - 0 1426238316232 2 connected 5461-10922 [5461->-e7d1]
292f 127.0.0.1:30003@40003 master,fail? - 0 1426238318243 3 connected 10923-16383 42
e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460
`
	view, err := parseClusterNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(view) != 4 {
		t.Fatalf("%d nodes, want 4", len(view))
	}
	replica, withHost, failing, self := view[0], view[1], view[2], view[3]
	if !replica.replica || replica.masterID != "e7d1" || replica.port != 30004 || len(replica.slots) != 0 {
		t.Errorf("replica line parsed as %+v", replica)
	}
	if withHost.port != 30002 || strings.Join(withHost.slots, " ") != "5461-10922" {
		t.Errorf("a migrating slot or the hostname leaked in: %+v", withHost)
	}
	if !failing.failing || !failing.serves(42) || !failing.serves(16383) || failing.serves(43) || failing.firstSlot() != 42 {
		t.Errorf("pfail node with two ranges parsed as %+v", failing)
	}
	if !self.myself || self.replica || !self.serves(0) || self.serves(5461) {
		t.Errorf("myself line parsed as %+v", self)
	}
}

func TestParseClusterNodesRejectsAClusterStillForming(t *testing.T) {
	for _, line := range []string{
		"a1b2 127.0.0.1:30005@40005 handshake - 0 0 0 connected",
		"a1b2 :0@0 noaddr - 0 0 0 disconnected",
		"a1b2 127.0.0.1:30005@40005 master",
	} {
		if _, err := parseClusterNodes(line); err == nil {
			t.Errorf("parseClusterNodes(%q) succeeded; want an error", line)
		}
	}
}
