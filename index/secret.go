package index

// scopeChanged reports whether c changes what a proxy's scope is built
// from, so that the snapshot gets a new ConfigVersion: anything but
// endpoint shards and Secret rows. Secrets are read by SDS alone, straight
// from the snapshot, so rotating a gateway certificate does not make every
// proxy class compute its scope again.
func (c *ChangeSet) scopeChanged() bool {
	if len(c.Configs[ConfigSecret]) == 0 {
		return !c.EndpointsOnly()
	}
	rest := *c
	rest.Configs[ConfigSecret] = nil
	return !rest.Empty() && !rest.EndpointsOnly()
}
