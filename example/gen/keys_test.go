package gen

import "testing"

// Braces in a param would turn part of it into a hash tag (another cluster
// slot); % is escaped too so that escaped and literal values stay distinct.
func TestKeyParamsWithBracesAreEscaped(t *testing.T) {
	for _, c := range []struct{ tenant, want string }{
		{"acme", "report:{acme}:5"},
		{"a{b}", "report:{a%7Bb%7D}:5"},
		{"a%7Bb%7D", "report:{a%257Bb%257D}:5"},
		{"}", "report:{%7D}:5"},
	} {
		if got := tenantReportLockKey(c.tenant, 5); got != c.want {
			t.Errorf("tenantReportLockKey(%q) = %q, want %q", c.tenant, got, c.want)
		}
	}
	if got := inventoryLockKey(7, "{x}"); got != "inventory:7:%7Bx%7D" {
		t.Errorf("inventoryLockKey = %q", got)
	}
}

func TestKeyParamsWithoutSpecialCharactersAreUsedAsIs(t *testing.T) {
	if got := orderLockKey(-42); got != "order:-42" {
		t.Errorf("orderLockKey(-42) = %q", got)
	}
	if got := paymentLockKey("pay:9"); got != "payment:pay:9" {
		t.Errorf("paymentLockKey = %q", got)
	}
}
