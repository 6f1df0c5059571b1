package fakehs

import (
	"net/http"
	"slices"

	"maunium.net/go/mautrix/id"
)

// What an appservice needs to give each of its users a device of its own and
// to run that device's encryption from its transactions, without a /sync per
// user (issue 37), as the test Synapse does it with its experimental
// appservice features on (docker/synapse/config.go):
//
//   - MSC4190: the appservice creates its users' devices with PUT
//     /devices/{deviceId} (201, or 200 for one that exists) and deletes them
//     with DELETE, without user-interactive auth;
//   - MSC3202's device masquerading: ?org.matrix.msc3202.device_id= (or
//     device_id=) makes an appservice request that device's;
//   - MSC2409: to-device messages for its users' devices in its
//     transactions (registration: receive_ephemeral);
//   - MSC3202's transaction extensions: one-time key counts, unused fallback
//     key types and device list changes in its transactions (registration:
//     org.matrix.msc3202).
//
// Synapse turns the last two on with experimental_features; fakehs has them
// on always and, like Synapse, sends them only to registrations that ask.

// Transaction fields as Synapse 1.160 names them (synapse/appservice/api.py).
const (
	txnFieldEphemeral      = "ephemeral"
	txnFieldSoruEphemeral  = "de.sorunome.msc2409.ephemeral"
	txnFieldToDevice       = "de.sorunome.msc2409.to_device"
	txnFieldOTKCounts      = "org.matrix.msc3202.device_one_time_keys_count"
	txnFieldOTKCountsOld   = "org.matrix.msc3202.device_one_time_key_counts" // Synapse sends both spellings
	txnFieldFallbackTypes  = "org.matrix.msc3202.device_unused_fallback_key_types"
	txnFieldDeviceLists    = "org.matrix.msc3202.device_lists"
	errUnknownDeviceCode   = "ORG.MATRIX.MSC4326.M_UNKNOWN_DEVICE"
	unstableDeviceIDParam  = "org.matrix.msc3202.device_id"
	deviceIDParam          = "device_id"
	maxTxnToDeviceMessages = 100 // Synapse's MAX_TO_DEVICE_MESSAGES_PER_TRANSACTION
)

// deviceInfo is a device created without a login, by an appservice for one
// of its users (MSC4190).
type deviceInfo struct {
	DisplayName string
}

// masqueradedDevice resolves MSC3202's device masquerading for an appservice
// request acting as uid: the device named by the query, which must exist, as
// Synapse's Auth.get_appservice_user checks (400, MSC4326's unstable
// errcode).
func (s *Server) masqueradedDevice(r *http.Request, uid id.UserID) (id.DeviceID, error) {
	q := r.URL.Query()
	dev := q.Get(deviceIDParam)
	if !q.Has(deviceIDParam) {
		dev = q.Get(unstableDeviceIDParam)
	}
	if dev == "" {
		return "", nil
	}
	if !slices.Contains(s.state.devicesOf(uid), id.DeviceID(dev)) {
		return "", mErr(http.StatusBadRequest, errUnknownDeviceCode,
			"Application service trying to use a device that doesn't exist ('%s' for %s)", dev, uid)
	}
	return id.DeviceID(dev), nil
}

// handleGetDevices is GET /devices: the caller's devices, those it logged in
// with and those an appservice created for it.
func (s *Server) handleGetDevices(r *http.Request, c *caller) (any, error) {
	devices := []map[string]any{}
	for _, d := range s.state.devicesOf(c.User) {
		var name any
		if info := s.state.e2ee.devices[deviceRef{c.User, d}]; info != nil && info.DisplayName != "" {
			name = info.DisplayName
		}
		devices = append(devices, map[string]any{"device_id": d, "user_id": c.User, "display_name": name})
	}
	return map[string]any{"devices": devices}, nil
}

// handlePutDevice is PUT /devices/{deviceId}. An appservice acting as one of
// its users creates the device when it does not exist (MSC4190: 201, else
// 200) and sets its display name when one is given; for anyone else it only
// renames an existing device (404 otherwise), as in Synapse. Either is a
// device list change of the user (Synapse's notify_device_update).
func (s *Server) handlePutDevice(w http.ResponseWriter, r *http.Request) {
	unlock := s.lock(true)
	status, err := s.putDevice(r)
	unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, struct{}{})
}

func (s *Server) putDevice(r *http.Request) (int, error) {
	c, err := s.authenticate(r)
	if err != nil {
		return 0, err
	}
	var req struct {
		DisplayName *string `json:"display_name"`
	}
	if err := readJSON(r, &req); err != nil {
		return 0, err
	}
	dev := deviceRef{c.User, id.DeviceID(r.PathValue("deviceId"))}
	exists := slices.Contains(s.state.devicesOf(c.User), dev.Device)
	if c.AS == nil && !exists {
		return 0, mErr(http.StatusNotFound, "M_NOT_FOUND", "Unknown device")
	}
	info := s.state.e2ee.devices[dev]
	if info == nil {
		info = &deviceInfo{}
		s.state.e2ee.devices[dev] = info
	}
	if req.DisplayName != nil {
		info.DisplayName = *req.DisplayName
	}
	s.noteDeviceListChange(c.User)
	if c.AS != nil && !exists {
		return http.StatusCreated, nil
	}
	return http.StatusOK, nil
}

// handleDeleteDevice is DELETE /devices/{deviceId} by an appservice acting as
// one of its users (MSC4190: no user-interactive auth): the device, its
// access tokens, its keys and its waiting to-device messages go, and its user's
// device list changed. Deleting a device as a user needs user-interactive
// auth in Synapse, which fakehs does not model: it refuses.
func (s *Server) handleDeleteDevice(r *http.Request, c *caller) (any, error) {
	if c.AS == nil {
		return nil, mErr(http.StatusUnauthorized, "M_FORBIDDEN", "fakehs: deleting a device as a user needs user-interactive auth, which fakehs does not model")
	}
	dev := deviceRef{c.User, id.DeviceID(r.PathValue("deviceId"))}
	if !slices.Contains(s.state.devicesOf(c.User), dev.Device) {
		// Synapse deletes nothing and answers 200.
		return struct{}{}, nil
	}
	delete(s.state.e2ee.devices, dev)
	delete(s.state.e2ee.keys, dev)
	delete(s.state.e2ee.toDevice, dev)
	for tok, sess := range s.state.sessions {
		if sess.User == dev.User && sess.Device == dev.Device {
			delete(s.state.sessions, tok)
		}
	}
	s.noteDeviceListChange(c.User)
	return struct{}{}, nil
}

// noteDeviceListChange records that u's devices or device keys changed: for
// /sync's device_lists, and for the transactions of every appservice that
// asked for MSC3202's and is interested in u's device list (Synapse's
// _is_appservice_interested_in_device_lists_of_user: u is its own, or shares
// a room with one of its users). Called with Server.mu held for writing.
func (s *Server) noteDeviceListChange(u id.UserID) {
	s.state.e2ee.keysChanged[u] = s.state.nextStream()
	s.state.notify()
	for _, as := range s.asList {
		if as.reg.MSC3202 && s.interestedInDeviceListOf(as, u) {
			as.queueDeviceListChange(u)
		}
	}
}

func (s *Server) interestedInDeviceListOf(as *asState, u id.UserID) bool {
	if as.owns(u) {
		return true
	}
	for rid := range s.state.userRooms[u] {
		rm := s.state.rooms[rid]
		if rm.membership(u) != "join" {
			continue
		}
		for _, m := range rm.members("join") {
			if as.owns(m) {
				return true
			}
		}
	}
	return false
}

// queueToDevice hands a to-device message for one of its users' devices to
// the appservices that asked for ephemeral data (MSC2409), as Synapse sends
// it: the message with to_user_id and to_device_id, unless LoseToDevice
// asked to lose it. Called with Server.mu held for writing.
func (s *Server) queueToDevice(to deviceRef, m *toDeviceMsg) {
	for _, as := range s.asList {
		if !(as.reg.EphemeralEvents || as.reg.SoruEphemeralEvents) || !as.owns(to.User) {
			continue
		}
		if s.state.e2ee.lose.take(m.Type) {
			return
		}
		msg := map[string]any{
			"to_user_id": to.User, "to_device_id": to.Device,
			"sender": m.Sender, "type": m.Type, "content": m.Content,
		}
		as.qmu.Lock()
		as.toDevice = append(as.toDevice, msg)
		as.qmu.Unlock()
		as.wake()
	}
}

// forAppservice says whether u belongs to an appservice that asked for
// to-device messages (MSC2409). Called with Server.mu held.
func (s *Server) forAppservice(u id.UserID) bool {
	for _, as := range s.asList {
		if (as.reg.EphemeralEvents || as.reg.SoruEphemeralEvents) && as.owns(u) {
			return true
		}
	}
	return false
}

func (as *asState) queueDeviceListChange(u id.UserID) {
	as.qmu.Lock()
	as.devChanged = append(as.devChanged, u)
	as.qmu.Unlock()
	as.wake()
}

// txnExtras is what a transaction carries beside its events: MSC2409's
// to-device messages and MSC3202's changed device lists.
type txnExtras struct {
	toDevice []map[string]any
	changed  []id.UserID
}

func (x txnExtras) empty() bool { return len(x.toDevice) == 0 && len(x.changed) == 0 }

// addTxnExtensions adds to a transaction body what the registration asked
// for beyond events, as Synapse's ApplicationServiceApi.push_bulk does, with
// key counts computed now, at sending time. Called with Server.mu held.
func (s *Server) addTxnExtensions(as *asState, body map[string]any, batch []*evt, x txnExtras) {
	if as.reg.EphemeralEvents {
		// fakehs has no typing, receipts or presence to push.
		body[txnFieldEphemeral] = []any{}
	}
	if as.reg.SoruEphemeralEvents {
		body[txnFieldSoruEphemeral] = []any{}
	}
	if as.reg.EphemeralEvents || as.reg.SoruEphemeralEvents {
		toDevice := x.toDevice
		if toDevice == nil {
			toDevice = []map[string]any{}
		}
		body[txnFieldToDevice] = toDevice
	}
	if !as.reg.MSC3202 {
		return
	}
	counts, fallbacks := s.txnKeyCounts(as, batch, x.toDevice)
	if len(counts) > 0 {
		body[txnFieldOTKCounts] = counts
		body[txnFieldOTKCountsOld] = counts
	}
	if len(fallbacks) > 0 {
		body[txnFieldFallbackTypes] = fallbacks
	}
	if len(x.changed) > 0 {
		changed := slices.Clone(x.changed)
		slices.Sort(changed)
		body[txnFieldDeviceLists] = map[string]any{"changed": slices.Compact(changed), "left": []id.UserID{}}
	}
}

// txnKeyCounts follows Synapse's _compute_msc3202_otk_counts_and_fallback_keys:
// for the appservice's sender, its users joined to the rooms of the batch's
// events and the recipients of its to-device messages, every device's one-time
// key counts by algorithm ({} for a device without any) and its unused
// fallback key types ([] for none).
func (s *Server) txnKeyCounts(as *asState, batch []*evt, toDevice []map[string]any) (map[id.UserID]map[id.DeviceID]map[string]int, map[id.UserID]map[id.DeviceID][]string) {
	users := map[id.UserID]bool{as.sender: true}
	for _, e := range batch {
		for _, m := range e.Room.members("join") {
			if as.owns(m) {
				users[m] = true
			}
		}
	}
	for _, m := range toDevice {
		users[m["to_user_id"].(id.UserID)] = true
	}
	counts := map[id.UserID]map[id.DeviceID]map[string]int{}
	fallbacks := map[id.UserID]map[id.DeviceID][]string{}
	for u := range users {
		for _, d := range s.state.devicesOf(u) {
			ref := deviceRef{u, d}
			c := map[string]int{}
			for alg, n := range s.state.oneTimeKeyCounts(ref) {
				if n > 0 {
					c[alg] = n
				}
			}
			if counts[u] == nil {
				counts[u] = map[id.DeviceID]map[string]int{}
				fallbacks[u] = map[id.DeviceID][]string{}
			}
			counts[u][d] = c
			fallbacks[u][d] = s.state.unusedFallbackKeyTypes(ref)
		}
	}
	return counts, fallbacks
}
