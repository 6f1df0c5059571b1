package config

import "time"

// DefaultRoomKeyWait is how long an encrypted message waits for its room key
// by default (room_key_wait): a client sends the key before the message, but
// the homeserver may push the two in separate transactions in either order.
const DefaultRoomKeyWait = 10 * time.Second

// MaxRoomKeyWait bounds room_key_wait: a room's later messages wait behind
// one whose key has not come, so order holds, and a long wait stalls them.
const MaxRoomKeyWait = 2 * time.Minute

// encryption reads the top-level encryption flag. An agent's device hears its
// to-device messages (room keys), device list changes and one-time key counts
// only in the appservice transactions the homeserver pushes (MSC2409,
// MSC3202), not through the /sync fallback an appservice user has no device
// for, so every Matrix transport must have a push listener.
func (p *parser) encryption(top map[string]field, cfg *Config) {
	f, ok := top["encryption"]
	if ok {
		cfg.Encryption = p.flag(f, "encryption", false)
	}
	p.roomKeyWait(top, cfg)
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

// roomKeyWait reads room_key_wait, which only encryption: true uses.
func (p *parser) roomKeyWait(top map[string]field, cfg *Config) {
	if cfg.Encryption {
		cfg.RoomKeyWait = DefaultRoomKeyWait
	}
	d := p.duration(top, "room_key_wait")
	switch {
	case d == 0:
	case !cfg.Encryption:
		p.errorf(top["room_key_wait"].val, "room_key_wait", "is how long an encrypted message waits for its room key; it needs encryption: true")
	case d > MaxRoomKeyWait:
		p.errorf(top["room_key_wait"].val, "room_key_wait", "must be at most %s (a room's later messages wait behind one whose key has not come), got %s", MaxRoomKeyWait, d)
	default:
		cfg.RoomKeyWait = d
	}
}
