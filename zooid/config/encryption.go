package config

// encryption reads the top-level encryption flag. An agent's device hears its
// to-device messages (room keys), device list changes and one-time key counts
// only in the appservice transactions the homeserver pushes (MSC2409,
// MSC3202), not through the /sync fallback an appservice user has no device
// for, so every Matrix transport must have a push listener.
func (p *parser) encryption(top map[string]field, cfg *Config) {
	f, ok := top["encryption"]
	if !ok {
		return
	}
	cfg.Encryption = p.flag(f, "encryption", false)
	if !cfg.Encryption {
		return
	}
	for i, t := range cfg.Transports {
		if t.Matrix != nil && t.Matrix.Listen == "" {
			p.errorf(f.val, "encryption", "needs transports[%d] (%s) to set listen: an agent's device hears its room keys, device lists and one-time key counts only in the transactions the homeserver pushes there (MSC2409, MSC3202)", i, t.Name)
		}
	}
	hasMatrix := false
	for _, t := range cfg.Transports {
		hasMatrix = hasMatrix || t.Matrix != nil
	}
	if !hasMatrix {
		p.errorf(f.val, "encryption", "is for Matrix rooms and no transport is of type matrix")
	}
}
