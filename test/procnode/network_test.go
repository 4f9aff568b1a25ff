package procnode

import (
	"net/netip"
	"testing"
)

// TestAllocateGoesRound: addresses go out in turn round the range, a freed one only once the
// others have, and a full range says so.
func TestAllocateGoesRound(t *testing.T) {
	prefix := netip.MustParsePrefix("10.250.0.0/28") // .2 to .14 for pods
	n := &network{prefix: prefix, gateway: prefix.Addr().Next(), used: map[netip.Addr]bool{}}
	take := func() netip.Addr {
		t.Helper()
		a, err := n.allocate()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a, b := take(), take(); a.String() != "10.250.0.2" || b.String() != "10.250.0.3" {
		t.Fatalf("first addresses %s, %s; want 10.250.0.2, 10.250.0.3", a, b)
	}
	n.release(netip.MustParseAddr("10.250.0.2"))
	if a := take(); a.String() != "10.250.0.4" {
		t.Errorf("after freeing .2 the next address is %s, want .4: a freed address waits its turn", a)
	}
	for range 10 { // .5 to .14
		take()
	}
	if a := take(); a.String() != "10.250.0.2" {
		t.Errorf("once round the range, the next address is %s, want the freed 10.250.0.2", a)
	}
	if a, err := n.allocate(); err == nil {
		t.Errorf("a full range handed out %s", a)
	}
}
