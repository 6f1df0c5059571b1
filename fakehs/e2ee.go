package fakehs

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"

	"maunium.net/go/mautrix/id"
)

// What end-to-end encryption needs of a homeserver (client-server API,
// "End-to-end encryption" and "Send-to-Device messaging"): device keys,
// one-time and fallback keys, to-device messages and device list changes in
// /sync. The server only stores and hands out what clients upload; it never
// looks inside a key or a ciphertext, as a real homeserver does not.

// deviceRef is one device of one user.
type deviceRef struct {
	User   id.UserID
	Device id.DeviceID
}

// deviceKeys is what a device uploaded: its identity keys and its one-time
// and fallback keys, kept by "algorithm:key_id".
type deviceKeys struct {
	identity json.RawMessage // device_keys as uploaded; nil until uploaded
	// oneTime holds unclaimed one-time keys; order is upload order, which is
	// the order they are claimed in.
	oneTime map[string]json.RawMessage
	order   []string
	// fallback is the fallback key per algorithm: kept after it is claimed
	// (handed out again until replaced), used says whether it was.
	fallback map[string]*fallbackKey
}

type fallbackKey struct {
	keyID string // "algorithm:key_id"
	key   json.RawMessage
	used  bool
}

// toDeviceMsg is one to-device message waiting for its device.
type toDeviceMsg struct {
	Stream  int64
	Sender  id.UserID
	Type    string
	Content json.RawMessage
}

// e2eeState is the store's encryption part; every field is guarded by Server.mu.
type e2eeState struct {
	keys     map[deviceRef]*deviceKeys
	toDevice map[deviceRef][]*toDeviceMsg // ascending Stream
	// keysChanged is the stream position of each user's latest device key
	// change, for device_lists.changed in /sync.
	keysChanged map[id.UserID]int64
	// devices are those an appservice created for its users (MSC4190,
	// asdevices.go), with their display names.
	devices map[deviceRef]*deviceInfo
	// lose: to-device messages for an appservice's users' devices lost on
	// the way to the appservice (LoseToDevice); drop: those that arrive
	// nowhere, inbox included (DropToDevice).
	lose, drop toDeviceFault
}

// toDeviceFault counts the next to-device messages of each type a fault
// takes, and how many it took since it was armed.
type toDeviceFault struct {
	next  map[string]int
	taken int
}

// arm makes the fault take the next n messages of type typ, counting anew.
func (f *toDeviceFault) arm(typ string, n int) {
	if f.next == nil {
		f.next = map[string]int{}
	}
	f.next[typ] = n
	f.taken = 0
}

// take says whether a message of type typ is one the fault takes, counting it.
func (f *toDeviceFault) take(typ string) bool {
	if f.next[typ] == 0 {
		return false
	}
	f.next[typ]--
	f.taken++
	return true
}

// armToDevice arms f (under Server.mu) and returns how many it took so far.
func (s *Server) armToDevice(f *toDeviceFault, typ string, n int) func() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.arm(typ, n)
	return func() int {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return f.taken
	}
}

func newE2EEState() e2eeState {
	return e2eeState{
		keys:        map[deviceRef]*deviceKeys{},
		toDevice:    map[deviceRef][]*toDeviceMsg{},
		keysChanged: map[id.UserID]int64{},
		devices:     map[deviceRef]*deviceInfo{},
	}
}

func (st *store) deviceKeysOf(d deviceRef) *deviceKeys {
	k := st.e2ee.keys[d]
	if k == nil {
		k = &deviceKeys{oneTime: map[string]json.RawMessage{}, fallback: map[string]*fallbackKey{}}
		st.e2ee.keys[d] = k
	}
	return k
}

// oneTimeKeyCounts counts a device's unclaimed one-time keys by algorithm.
// signed_curve25519 is always there, as Synapse answers (element-android
// needs the zero: synapse#10456).
func (st *store) oneTimeKeyCounts(d deviceRef) map[string]int {
	counts := map[string]int{"signed_curve25519": 0}
	if k := st.e2ee.keys[d]; k != nil {
		for keyID := range k.oneTime {
			alg, _, _ := strings.Cut(keyID, ":")
			counts[alg]++
		}
	}
	return counts
}

// unusedFallbackKeyTypes lists the algorithms of a device's fallback keys not
// claimed yet, sorted; [] rather than null.
func (st *store) unusedFallbackKeyTypes(d deviceRef) []string {
	out := []string{}
	if k := st.e2ee.keys[d]; k != nil {
		for alg, fb := range k.fallback {
			if !fb.used {
				out = append(out, alg)
			}
		}
	}
	sort.Strings(out)
	return out
}

// devicesOf lists a user's devices: those with an access token, those an
// appservice created, and those that uploaded keys, sorted.
func (st *store) devicesOf(u id.UserID) []id.DeviceID {
	var out []id.DeviceID
	for _, sess := range st.sessions {
		if sess.User == u && sess.Device != "" && !slices.Contains(out, sess.Device) {
			out = append(out, sess.Device)
		}
	}
	for d := range st.e2ee.keys {
		if d.User == u && !slices.Contains(out, d.Device) {
			out = append(out, d.Device)
		}
	}
	for d := range st.e2ee.devices {
		if d.User == u && !slices.Contains(out, d.Device) {
			out = append(out, d.Device)
		}
	}
	slices.Sort(out)
	return out
}

// handleKeysUpload is POST /keys/upload: device keys, one-time keys and
// fallback keys of the caller's device; it answers one_time_key_counts. A
// one-time key id uploaded again with other content is refused, as Synapse
// does (400 M_UNKNOWN); the same content again is accepted.
func (s *Server) handleKeysUpload(r *http.Request, c *caller) (any, error) {
	var req struct {
		DeviceKeys   json.RawMessage            `json:"device_keys"`
		OneTimeKeys  map[string]json.RawMessage `json:"one_time_keys"`
		FallbackKeys map[string]json.RawMessage `json:"fallback_keys"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	if c.Device == "" {
		return nil, errInvalidParam("This request has no device to upload keys for")
	}
	dev := deviceRef{c.User, c.Device}
	k := s.state.deviceKeysOf(dev)
	for keyID, key := range req.OneTimeKeys {
		if !strings.Contains(keyID, ":") {
			return nil, errInvalidParam("One time key id %q is not algorithm:key_id", keyID)
		}
		if old, ok := k.oneTime[keyID]; ok && !jsonEqual(old, key) {
			return nil, mErr(http.StatusBadRequest, "M_UNKNOWN", "One time key %s already exists. Old key: %s; new key: %s", keyID, old, key)
		}
	}
	for keyID := range req.FallbackKeys {
		if !strings.Contains(keyID, ":") {
			return nil, errInvalidParam("Fallback key id %q is not algorithm:key_id", keyID)
		}
	}
	if len(req.DeviceKeys) > 0 && string(req.DeviceKeys) != "null" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(req.DeviceKeys, &obj); err != nil || obj == nil {
			return nil, errBadJSON("device_keys must be an object")
		}
		if k.identity == nil || !jsonEqual(k.identity, req.DeviceKeys) {
			k.identity = req.DeviceKeys
			s.noteDeviceListChange(c.User)
		}
	}
	ids := make([]string, 0, len(req.OneTimeKeys))
	for keyID := range req.OneTimeKeys {
		if _, ok := k.oneTime[keyID]; !ok {
			ids = append(ids, keyID)
		}
	}
	sort.Strings(ids)
	for _, keyID := range ids {
		k.oneTime[keyID] = req.OneTimeKeys[keyID]
		k.order = append(k.order, keyID)
	}
	for keyID, key := range req.FallbackKeys {
		alg, _, _ := strings.Cut(keyID, ":")
		k.fallback[alg] = &fallbackKey{keyID: keyID, key: key}
	}
	return map[string]any{"one_time_key_counts": s.state.oneTimeKeyCounts(dev)}, nil
}

// handleKeysQuery is POST /keys/query: the device keys of the users asked
// for (an empty list asks for every device). Users of other servers cannot
// be reached from a fake and are left out; cross-signing keys are not kept.
func (s *Server) handleKeysQuery(r *http.Request, c *caller) (any, error) {
	var req struct {
		DeviceKeys map[id.UserID][]id.DeviceID `json:"device_keys"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	out := map[id.UserID]map[id.DeviceID]json.RawMessage{}
	for u, want := range req.DeviceKeys {
		if u.Homeserver() != s.cfg.serverName {
			continue
		}
		devs := map[id.DeviceID]json.RawMessage{}
		for _, d := range s.state.devicesOf(u) {
			if len(want) > 0 && !slices.Contains(want, d) {
				continue
			}
			k := s.state.e2ee.keys[deviceRef{u, d}]
			if k == nil || k.identity == nil {
				continue
			}
			var name string
			if info := s.state.e2ee.devices[deviceRef{u, d}]; info != nil {
				name = info.DisplayName
			}
			devs[d] = withUnsigned(k.identity, name)
		}
		out[u] = devs
	}
	return map[string]any{
		"device_keys": out, "failures": map[string]any{},
		"master_keys": map[string]any{}, "self_signing_keys": map[string]any{}, "user_signing_keys": map[string]any{},
	}, nil
}

// withUnsigned adds the unsigned object Synapse adds to each device's keys:
// the device's display name when it has one, else empty.
func withUnsigned(keys json.RawMessage, displayName string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(keys, &obj) != nil {
		return keys
	}
	if _, ok := obj["unsigned"]; !ok {
		obj["unsigned"] = json.RawMessage(`{}`)
		if displayName != "" {
			obj["unsigned"] = mustJSON(map[string]string{"device_display_name": displayName})
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return keys
	}
	return b
}

// handleKeysClaim is POST /keys/claim: one one-time key per device asked for,
// removed as it is handed out; with none left, the device's fallback key of
// that algorithm (handed out again until replaced); with neither, nothing
// for that device.
func (s *Server) handleKeysClaim(r *http.Request, c *caller) (any, error) {
	var req struct {
		OneTimeKeys map[id.UserID]map[id.DeviceID]string `json:"one_time_keys"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	out := map[id.UserID]map[id.DeviceID]map[string]json.RawMessage{}
	for u, devs := range req.OneTimeKeys {
		for d, alg := range devs {
			k := s.state.e2ee.keys[deviceRef{u, d}]
			if k == nil {
				continue
			}
			keyID, key, ok := k.claim(alg)
			if !ok {
				continue
			}
			if out[u] == nil {
				out[u] = map[id.DeviceID]map[string]json.RawMessage{}
			}
			out[u][d] = map[string]json.RawMessage{keyID: key}
		}
	}
	return map[string]any{"one_time_keys": out, "failures": map[string]any{}}, nil
}

// claim takes the device's first unclaimed one-time key of alg, else its
// fallback key of alg.
func (k *deviceKeys) claim(alg string) (string, json.RawMessage, bool) {
	for i, keyID := range k.order {
		if a, _, _ := strings.Cut(keyID, ":"); a == alg {
			key := k.oneTime[keyID]
			delete(k.oneTime, keyID)
			k.order = slices.Delete(k.order, i, i+1)
			return keyID, key, true
		}
	}
	if fb := k.fallback[alg]; fb != nil {
		fb.used = true
		return fb.keyID, fb.key, true
	}
	return "", nil, false
}

// handleSendToDevice is PUT /sendToDevice/{type}/{txnId}: each message goes
// to the device named, or with "*" to every device of the user; a device
// that does not exist gets nothing, as in Synapse. A txn id already used by
// the caller is answered without sending again.
func (s *Server) handleSendToDevice(r *http.Request, c *caller) (any, error) {
	var req struct {
		Messages map[id.UserID]map[string]json.RawMessage `json:"messages"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	key := txnKey{c.txnScope(), r.URL.Path}
	if _, ok := s.state.txns[key]; ok {
		return struct{}{}, nil
	}
	typ := r.PathValue("type")
	var sent bool
	for u, byDevice := range req.Messages {
		if u.Homeserver() != s.cfg.serverName {
			continue
		}
		for target, content := range byDevice {
			var obj map[string]json.RawMessage
			if json.Unmarshal(content, &obj) != nil || obj == nil {
				return nil, errBadJSON("the message for %s's %s must be an object", u, target)
			}
			devs := s.state.devicesOf(u)
			if target != "*" {
				if !slices.Contains(devs, id.DeviceID(target)) {
					continue
				}
				devs = []id.DeviceID{id.DeviceID(target)}
			}
			for _, d := range devs {
				ref := deviceRef{u, d}
				if s.forAppservice(u) && s.state.e2ee.drop.take(typ) {
					sent = true
					continue
				}
				m := &toDeviceMsg{Stream: s.state.nextStream(), Sender: c.User, Type: typ, Content: content}
				s.state.e2ee.toDevice[ref] = append(s.state.e2ee.toDevice[ref], m)
				s.queueToDevice(ref, m)
				sent = true
			}
		}
	}
	s.state.txns[key] = ""
	if sent {
		s.state.notify()
	}
	return struct{}{}, nil
}

// LoseToDevice makes the next n to-device messages of type typ sent to an
// appservice's users' devices never reach the appservice, as Synapse drops
// the to-device messages of an appservice transaction it had to retry
// (element-hq/synapse#14710) or whose notification it handled after a later
// one's: the sender's request succeeds and the sender takes them as
// delivered, and the device's inbox (/sync as the device) still holds them.
// The returned function says how many were lost so far, so a test can
// assert the fault fired.
func (s *Server) LoseToDevice(typ string, n int) (lost func() int) {
	return s.armToDevice(&s.state.e2ee.lose, typ, n)
}

// DropToDevice makes the next n to-device messages of type typ sent to an
// appservice's users' devices arrive nowhere: neither pushed to the
// appservice nor kept in the device's inbox, while the sender's request
// succeeds. That is a key the sender's client never sent to these devices
// though it took them as served; LoseToDevice is Synapse losing one on the
// way to the appservice, which the inbox still holds. The returned function
// says how many were dropped so far.
func (s *Server) DropToDevice(typ string, n int) (dropped func() int) {
	return s.armToDevice(&s.state.e2ee.drop, typ, n)
}

// ToDeviceKept is how many to-device messages user's device's inbox keeps:
// those sent to it that it has not read past with /sync, pushed to an
// appservice or not (Synapse's device_inbox rows for the device).
func (s *Server) ToDeviceKept(user id.UserID, device id.DeviceID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.state.e2ee.toDevice[deviceRef{user, device}])
}

// ackToDevice drops the caller's to-device messages up to since: a client
// that syncs with a since token has received everything before it.
func (s *Server) ackToDevice(r *http.Request) {
	since := r.URL.Query().Get("since")
	if since == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.authenticate(r)
	if err != nil || c.Device == "" {
		return
	}
	pos, err := s.parseSyncToken(since)
	if err != nil {
		return
	}
	ref := deviceRef{c.User, c.Device}
	msgs := s.state.e2ee.toDevice[ref]
	i := sort.Search(len(msgs), func(i int) bool { return msgs[i].Stream > pos })
	if i == len(msgs) {
		delete(s.state.e2ee.toDevice, ref)
		return
	}
	s.state.e2ee.toDevice[ref] = msgs[i:]
}

// syncE2EE adds the encryption parts of a /sync response to resp and says
// whether any of them is news (to-device messages, device list changes).
// The key counts are always there, as in Synapse.
func (s *Server) syncE2EE(c *caller, req *syncRequest, resp map[string]any) bool {
	ref := deviceRef{c.User, c.Device}
	resp["device_one_time_keys_count"] = s.state.oneTimeKeyCounts(ref)
	resp["device_unused_fallback_key_types"] = s.state.unusedFallbackKeyTypes(ref)
	news := false
	var events []map[string]any
	for _, m := range s.state.e2ee.toDevice[ref] {
		if m.Stream > req.since || req.initial {
			events = append(events, map[string]any{"sender": m.Sender, "type": m.Type, "content": m.Content})
		}
	}
	if len(events) > 0 {
		resp["to_device"] = map[string]any{"events": events}
		news = true
	}
	if req.initial {
		return news
	}
	changed, left := s.deviceListChanges(c.User, req.since)
	if len(changed) > 0 || len(left) > 0 {
		lists := map[string]any{}
		if len(changed) > 0 {
			lists["changed"] = changed
		}
		if len(left) > 0 {
			lists["left"] = left
		}
		resp["device_lists"] = lists
		news = true
	}
	return news
}

// deviceListChanges are the users whose device keys changed since the token
// and who share a joined room with u (u included), with the users u newly
// shares a room with (a join since the token, theirs or u's: as Synapse says,
// a client that kept their device list while they shared no room heard of no
// change and must query again), and the users who no longer share any joined
// room with u because of a leave since the token.
func (s *Server) deviceListChanges(u id.UserID, since int64) (changed, left []id.UserID) {
	shared := s.sharesRoomWith(u)
	for other, pos := range s.state.e2ee.keysChanged {
		if pos > since && (other == u || shared[other]) {
			changed = append(changed, other)
		}
	}
	for other := range s.newlySharedWith(u, since) {
		if !slices.Contains(changed, other) {
			changed = append(changed, other)
		}
	}
	gone := map[id.UserID]bool{}
	for rid := range s.state.userRooms[u] {
		rm := s.state.rooms[rid]
		for k, e := range rm.state {
			if k.Type != "m.room.member" || e.Stream <= since || (e.Membership != "leave" && e.Membership != "ban") {
				continue
			}
			if id.UserID(k.Key) == u {
				// u left: everyone joined there is a candidate.
				for _, m := range rm.members("join") {
					gone[m] = true
				}
				continue
			}
			gone[id.UserID(k.Key)] = true
		}
	}
	for other := range gone {
		if other != u && !shared[other] {
			left = append(left, other)
		}
	}
	slices.Sort(changed)
	slices.Sort(left)
	return changed, left
}

// sharesRoomWith is every user joined to a room u is joined to.
func (s *Server) sharesRoomWith(u id.UserID) map[id.UserID]bool {
	out := map[id.UserID]bool{}
	for rid := range s.state.userRooms[u] {
		rm := s.state.rooms[rid]
		if rm.membership(u) != "join" {
			continue
		}
		for _, m := range rm.members("join") {
			out[m] = true
		}
	}
	return out
}

// newlySharedWith is every user who joined a room u is joined to since the
// token, and every member of a room u joined since the token; u is left out.
// As in Synapse, every m.room.member event with membership join since the
// token counts, a display name change too (Synapse does not look at the
// membership before it); invites and knocks, which Synapse counts too, are
// not modelled.
func (s *Server) newlySharedWith(u id.UserID, since int64) map[id.UserID]bool {
	out := map[id.UserID]bool{}
	for rid := range s.state.userRooms[u] {
		rm := s.state.rooms[rid]
		if rm.membership(u) != "join" {
			continue
		}
		for k, e := range rm.state {
			if k.Type != "m.room.member" || e.Stream <= since || e.Membership != "join" {
				continue
			}
			if id.UserID(k.Key) == u {
				for _, m := range rm.members("join") {
					out[m] = true
				}
				continue
			}
			out[id.UserID(k.Key)] = true
		}
	}
	delete(out, u)
	return out
}
