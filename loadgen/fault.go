package loadgen

// Faulty proxies, for the failure modes a control plane must survive
// without the healthy proxies noticing (Config.StalledProxies and
// Config.NackingProxies):
//
//   - A stalled proxy gets full config, then stops reading its stream and
//     keeps it open: the server's writes to it block. The healthy proxies'
//     convergence must stay what it is without it.
//   - A NACKing proxy rejects every response it gets. The server must not
//     loop resending rejected content: one response per type per change.
//
// Faulty proxies are spread evenly over the proxy indexes, and they are
// kept out of the healthy proxies' figures: a stalled proxy counts in time
// to full config but not in changes, a NACKing one in neither (it never
// accepts a config). The report counts what the NACKing proxies received.

// fault is a proxy's role.
type fault uint8

const (
	healthy fault = iota
	stalled       // stops reading after full config
	nacking       // NACKs every response
)

// faultRoles assigns roles: stalled proxies at evenly spaced indexes, then
// NACKing ones in between, skipping taken indexes. Nil when there are none.
func faultRoles(proxies, stalledN, nackingN int) []fault {
	if stalledN+nackingN == 0 {
		return nil
	}
	roles := make([]fault, proxies)
	place := func(n int, role fault, offset func(stride int) int) {
		if n == 0 {
			return
		}
		stride := proxies / n
		for i := range n {
			at := (i*stride + offset(stride)) % proxies
			for roles[at] != healthy {
				at = (at + 1) % proxies
			}
			roles[at] = role
		}
	}
	place(stalledN, stalled, func(stride int) int { return stride - 1 })
	place(nackingN, nacking, func(stride int) int { return stride / 2 })
	return roles
}

// roleOf returns proxy idx's role.
func (r *runner) roleOf(idx int) fault {
	if r.roles == nil {
		return healthy
	}
	return r.roles[idx]
}

// expectFull is how many proxies can reach full config.
func (c *Config) expectFull() int { return c.Proxies - c.NackingProxies }

// healthyProxies is how many proxies count in change convergence.
func (c *Config) healthyProxies() int { return c.Proxies - c.NackingProxies - c.StalledProxies }
