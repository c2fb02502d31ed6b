package loadgen

import "testing"

// TestFaultRoles: exactly the asked numbers of stalled and NACKing proxies,
// never the same proxy twice, spread over the indexes.
func TestFaultRoles(t *testing.T) {
	for _, tc := range []struct{ proxies, stalled, nacking int }{
		{10, 3, 2}, {10, 5, 4}, {7, 0, 6}, {1000, 1, 1}, {3, 1, 1},
	} {
		roles := faultRoles(tc.proxies, tc.stalled, tc.nacking)
		count := map[fault]int{}
		for _, r := range roles {
			count[r]++
		}
		if count[stalled] != tc.stalled || count[nacking] != tc.nacking || count[healthy] != tc.proxies-tc.stalled-tc.nacking {
			t.Errorf("%+v: roles %v", tc, count)
		}
	}
	if faultRoles(10, 0, 0) != nil {
		t.Error("no faults: roles should be nil")
	}
	// Spread: with 2 stalled among 1,000 they are not neighbours.
	roles := faultRoles(1000, 2, 0)
	var at []int
	for i, r := range roles {
		if r == stalled {
			at = append(at, i)
		}
	}
	if len(at) != 2 || at[1]-at[0] < 400 {
		t.Errorf("stalled proxies at %v", at)
	}
}

// TestFaultConfig: at least one proxy must stay healthy.
func TestFaultConfig(t *testing.T) {
	for _, c := range []Config{
		{XDS: "x:1", Proxies: 3, StalledProxies: 2, NackingProxies: 1},
		{XDS: "x:1", Proxies: 3, StalledProxies: -1},
	} {
		if _, err := c.withDefaults(); err == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
	c := Config{XDS: "x:1", Proxies: 3, StalledProxies: 1, NackingProxies: 1}
	if _, err := c.withDefaults(); err != nil {
		t.Errorf("valid fault config refused: %v", err)
	}
}
