package conformance

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// The homeserver's part of an appservice that gives each of its users a device of its own and
// runs that device's encryption from its transactions, without a /sync per user (issue 37):
//
//   - MSC4190: the appservice creates (PUT /devices/{deviceId}, 201 then 200) and deletes
//     (DELETE, no user-interactive auth) devices of the users it masquerades as (?user_id=);
//   - MSC3202's device masquerading: ?org.matrix.msc3202.device_id= makes a request that
//     device's, so keys are uploaded as it;
//   - MSC2409: to-device messages for those devices arrive in the pushed transaction, in
//     "de.sorunome.msc2409.to_device", each with "to_user_id" and "to_device_id";
//   - MSC3202's transaction extensions: "org.matrix.msc3202.device_one_time_keys_count"
//     (user → device → algorithm → count) and "org.matrix.msc3202.device_unused_fallback_key_types"
//     (user → device → algorithms) for the users a transaction concerns, and
//     "org.matrix.msc3202.device_lists" ({"changed": [...], "left": [...]}) for users sharing a
//     room with the appservice's users.
//
// Field names are Synapse 1.160's (synapse/appservice/api.py), with
// msc2409_to_device_messages_enabled and msc3202_transaction_extensions turned on.

// Transaction fields of MSC2409 and MSC3202, as Synapse names them.
const (
	txnToDevice       = "de.sorunome.msc2409.to_device"
	txnOTKCounts      = "org.matrix.msc3202.device_one_time_keys_count"
	txnOTKCountsOld   = "org.matrix.msc3202.device_one_time_key_counts"
	txnFallbackTypes  = "org.matrix.msc3202.device_unused_fallback_key_types"
	txnDeviceLists    = "org.matrix.msc3202.device_lists"
	conformanceToDevT = "org.example.conformance.todevice"
	// errUnknownDevice is Synapse's errcode for a masqueraded device that does not exist:
	// MSC4326's, still unstable.
	errUnknownDevice = "ORG.MATRIX.MSC4326.M_UNKNOWN_DEVICE"
)

// gjsonKey escapes a user id or device id for use as one gjson path component.
func gjsonKey(k string) string {
	r := strings.NewReplacer(".", `\.`, "*", `\*`, "?", `\?`, "|", `\|`, "#", `\#`, "@", `\@`)
	return r.Replace(k)
}

// pushedToDevice returns the to-device messages of type conformanceToDevT carrying label that
// the appservice's accepted transactions delivered, with the transaction that carried each.
func (s *suite) pushedToDevice(label string) (msgs, carriers []gjson.Result) {
	for _, body := range s.push.acceptedBodies() {
		for _, m := range body.Get(gjsonKey(txnToDevice)).Array() {
			if m.Get("type").String() == conformanceToDevT && m.Get("content.label").String() == label {
				msgs = append(msgs, m)
				carriers = append(carriers, body)
			}
		}
	}
	return msgs, carriers
}

// sendToDevice sends one conformanceToDevT message with label from c to user's device.
func sendToDevice(t testing.TB, c *Client, user id.UserID, dev id.DeviceID, label string) {
	t.Helper()
	c.MustDo(t, "PUT", CS("v3", "sendToDevice", conformanceToDevT, "conf-"+randomID(8)), map[string]any{
		"messages": map[string]any{string(user): map[string]any{string(dev): map[string]any{"label": label}}},
	})
}

func (s *suite) testAppserviceDevices(t *testing.T) {
	as := s.target.AppService
	if as == nil || !as.Devices {
		t.Skip("the target's appservice registration does not ask for device management and encryption transactions: set ZOOID_TEST_AS_DEVICES=1 when it does")
	}
	// Not parallel: the AppService area's retry test makes the homeserver hold back this
	// appservice's transactions for a while, and these checks wait for transactions.

	agent := s.registerASUser(t, "devagent")
	human := s.registerUser(t, "devhuman")
	dev := id.DeviceID("CONF" + strings.ToUpper(randomID(4)))
	devPath := CS("v3", "devices", string(dev))

	// MSC4190: the appservice creates its user's device: 201 the first time, 200 after.
	created := agent.Do(t, "PUT", devPath, map[string]any{"display_name": "conformance agent device"})
	MustStatus(t, created, http.StatusCreated, "")
	MustStatus(t, agent.Do(t, "PUT", devPath, map[string]any{}), http.StatusOK, "")
	listed := agent.MustDo(t, "GET", CS("v3", "devices"), nil)
	var found gjson.Result
	for _, d := range listed.Get("devices").Array() {
		if d.Get("device_id").String() == string(dev) {
			found = d
		}
	}
	MatchJSON(t, "the created device in GET /devices (its name kept by the second PUT without one)", found,
		KeyEqual("device_id", string(dev)), KeyEqual("display_name", "conformance agent device"))
	// mautrix's own call for it, which the daemon uses, works the same.
	other := id.DeviceID("CONF" + strings.ToUpper(randomID(4)))
	if err := agent.Mautrix(t).CreateDeviceMSC4190(context.Background(), other, "second"); err != nil {
		t.Fatalf("mautrix CreateDeviceMSC4190 as %s: %v", agent.AsUserID, err)
	}

	// Device masquerading: the request is the device's.
	onDev := agent.OnDevice(dev)
	MatchJSON(t, "whoami as the appservice user's device", onDev.MustDo(t, "GET", CS("v3", "account", "whoami"), nil),
		KeyEqual("user_id", string(agent.AsUserID)), KeyEqual("device_id", string(dev)))
	ghost := agent.OnDevice(id.DeviceID("NOSUCH" + strings.ToUpper(randomID(3))))
	// Synapse's errcode is MSC4326's unstable one.
	MustStatus(t, ghost.Do(t, "GET", CS("v3", "account", "whoami"), nil), http.StatusBadRequest, errUnknownDevice)

	// Keys uploaded as the device are the device's, for anyone to query and claim.
	res := onDev.MustDo(t, "POST", CS("v3", "keys", "upload"), map[string]any{
		"device_keys": deviceKeysOf(onDev),
		"one_time_keys": map[string]any{
			"signed_curve25519:AAAAAQ": oneTimeKey(onDev, "as-otk-1", false),
			"signed_curve25519:AAAAAg": oneTimeKey(onDev, "as-otk-2", false),
		},
		"fallback_keys": map[string]any{"signed_curve25519:AAAAAw": oneTimeKey(onDev, "as-fb", true)},
	})
	MatchJSON(t, "key upload as the appservice user's device", res, KeyEqual("one_time_key_counts.signed_curve25519", 2))
	q := human.MustDo(t, "POST", CS("v3", "keys", "query"), map[string]any{"device_keys": map[string]any{string(agent.AsUserID): []string{}}})
	keys := q.Get("device_keys." + gjsonKey(string(agent.AsUserID)) + "." + gjsonKey(string(dev)))
	MatchJSON(t, "the device's keys in keys/query", keys, KeyEqual("device_id", string(dev)), KeyEqual("user_id", string(agent.AsUserID)),
		KeyEqual("keys.curve25519:"+string(dev), "curve-"+string(dev)), KeyEqual("unsigned.device_display_name", "conformance agent device"))

	// MSC2409: a to-device message for the device arrives in a pushed transaction.
	l := s.label(t, 3)
	sendToDevice(t, human, agent.AsUserID, dev, l[0])
	var msgs []gjson.Result
	eventually(t, 60*time.Second, "a to-device message for the appservice user's device in a transaction", func() (bool, string) {
		msgs, _ = s.pushedToDevice(l[0])
		return len(msgs) > 0, fmt.Sprintf("%d transactions so far", len(s.push.acceptedBodies()))
	})
	if len(msgs) != 1 {
		t.Fatalf("the to-device message arrived %d times: %v", len(msgs), msgs)
	}
	MatchJSON(t, "pushed to-device message", msgs[0], KeyEqual("to_user_id", string(agent.AsUserID)), KeyEqual("to_device_id", string(dev)),
		KeyEqual("sender", string(human.UserID)), KeyEqual("type", conformanceToDevT), KeyEqual("content.label", l[0]))
	var fields []string
	for k := range msgs[0].Map() {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	MustEqualStrings(t, "fields of a pushed to-device message", fields, []string{"content", "sender", "to_device_id", "to_user_id", "type"})
	// The device's inbox keeps what was pushed: /sync as the device, asking for no rooms,
	// returns it too. The daemon reads it for a room key the homeserver did not push
	// (zooid/e2ee inbox.go), with mautrix's client.
	asDev := agent.OnDevice(dev).Mautrix(t)
	asDev.SetAppServiceDeviceID = true // as CreateDeviceMSC4190 leaves the daemon's client
	inbox, err := asDev.FullSyncRequest(context.Background(), mautrix.ReqSync{FilterID: inboxOnly})
	if err != nil {
		t.Fatalf("/sync as the appservice user's device: %v", err)
	}
	var inInbox int
	for _, ev := range inbox.ToDevice.Events {
		if ev.Type.Type == conformanceToDevT && gjson.GetBytes(ev.Content.VeryRaw, "label").String() == l[0] {
			inInbox++
		}
	}
	if inInbox != 1 || len(inbox.Rooms.Join) != 0 || inbox.NextBatch == "" {
		t.Fatalf("/sync as the device: the pushed message %d times in its inbox (want 1), %d joined rooms (want 0), next_batch %q", inInbox, len(inbox.Rooms.Join), inbox.NextBatch)
	}
	// A /sync going on from there reads past it, and the inbox keeps it no more: a /sync
	// from the start finds it gone. The daemon's reads rely on it to keep the inbox short.
	// (Synapse answers a repeated non-empty /sync from a cache for two minutes, keyed by
	// its parameters: the look from the start asks with another filter.)
	if _, err := asDev.FullSyncRequest(context.Background(), mautrix.ReqSync{Since: inbox.NextBatch, FilterID: inboxOnly}); err != nil {
		t.Fatalf("/sync as the device from its next_batch: %v", err)
	}
	again, err := asDev.FullSyncRequest(context.Background(), mautrix.ReqSync{FilterID: `{"room":{"rooms":[]},"presence":{"not_types":["*"]},"account_data":{"not_types":["*"]},"event_format":"client"}`})
	if err != nil {
		t.Fatalf("/sync as the device from the start, after reading past the message: %v", err)
	}
	for _, ev := range again.ToDevice.Events {
		if ev.Type.Type == conformanceToDevT && gjson.GetBytes(ev.Content.VeryRaw, "label").String() == l[0] {
			t.Fatalf("/sync as the device from the start still has the message it read past: the inbox keeps what its device has read")
		}
	}

	// MSC3202: after a claim, the next transaction that concerns the user carries the device's
	// one-time key count, one fewer, and its unused fallback key type. A to-device message for
	// the device is such a transaction.
	claim := human.MustDo(t, "POST", CS("v3", "keys", "claim"), map[string]any{
		"one_time_keys": map[string]any{string(agent.AsUserID): map[string]any{string(dev): "signed_curve25519"}},
	})
	if n := len(claim.Get("one_time_keys." + gjsonKey(string(agent.AsUserID)) + "." + gjsonKey(string(dev))).Map()); n != 1 {
		t.Fatalf("claim of the device's one-time key returned %d keys: %s", n, claim.Raw)
	}
	sendToDevice(t, human, agent.AsUserID, dev, l[1])
	var carrier gjson.Result
	eventually(t, 60*time.Second, "the transaction after the claim", func() (bool, string) {
		_, carriers := s.pushedToDevice(l[1])
		if len(carriers) == 0 {
			return false, "not yet pushed"
		}
		carrier = carriers[0]
		return true, ""
	})
	devKey := gjsonKey(string(agent.AsUserID)) + "." + gjsonKey(string(dev))
	MatchJSON(t, "one-time key count of the device in the transaction after the claim", carrier,
		KeyEqual(gjsonKey(txnOTKCounts)+"."+devKey+".signed_curve25519", 1))
	// Synapse sends the counts under the MSC's older spelling too, the same object.
	if old, cur := carrier.Get(gjsonKey(txnOTKCountsOld)), carrier.Get(gjsonKey(txnOTKCounts)); old.Raw != cur.Raw {
		t.Fatalf("%s = %s, want the same as %s = %s", txnOTKCountsOld, truncate(old.Raw, 500), txnOTKCounts, truncate(cur.Raw, 500))
	}
	if fb := carrier.Get(gjsonKey(txnFallbackTypes) + "." + devKey); !sameJSON(fb, []string{"signed_curve25519"}) {
		t.Fatalf("unused fallback key types of the device = %s, want [\"signed_curve25519\"]; transaction: %s", fb.Raw, truncate(carrier.Raw, 1500))
	}
	// The device without keys is there too, with no counts: Synapse lists every device of
	// the users the transaction concerns.
	if c := carrier.Get(gjsonKey(txnOTKCounts) + "." + gjsonKey(string(agent.AsUserID)) + "." + gjsonKey(string(other))); !sameJSON(c, map[string]any{}) {
		t.Fatalf("one-time key counts of the device without keys = %s, want {}", c.Raw)
	}

	// MSC3202: a user sharing a room with the appservice's user changes its devices (uploads
	// device keys), and a transaction says so in device_lists.changed.
	room := s.publicRoomWith(t, human, agent)
	peer := s.registerUser(t, "devpeer")
	peer.MustDo(t, "POST", CS("v3", "join", string(room)), map[string]any{})
	peer.MustDo(t, "POST", CS("v3", "keys", "upload"), map[string]any{"device_keys": deviceKeysOf(peer)})
	eventually(t, 60*time.Second, "the device list change of a user sharing a room with the appservice's user", func() (bool, string) {
		for _, body := range s.push.acceptedBodies() {
			if slices.Contains(userList(body.Get(gjsonKey(txnDeviceLists)+".changed")), string(peer.UserID)) {
				return true, ""
			}
		}
		return false, "no transaction lists " + string(peer.UserID) + " as changed"
	})

	// MSC4190: the appservice deletes the device without user-interactive auth; its keys go
	// with it.
	MustStatus(t, agent.Do(t, "DELETE", devPath, map[string]any{}), http.StatusOK, "")
	for _, d := range agent.MustDo(t, "GET", CS("v3", "devices"), nil).Get("devices").Array() {
		if d.Get("device_id").String() == string(dev) {
			t.Fatalf("device %s still listed after its deletion", dev)
		}
	}
	q = human.MustDo(t, "POST", CS("v3", "keys", "query"), map[string]any{"device_keys": map[string]any{string(agent.AsUserID): []string{}}})
	if k := q.Get("device_keys." + gjsonKey(string(agent.AsUserID)) + "." + gjsonKey(string(dev))); k.Exists() {
		t.Fatalf("keys of the deleted device still in keys/query: %s", k.Raw)
	}
	MustStatus(t, onDev.Do(t, "GET", CS("v3", "account", "whoami"), nil), http.StatusBadRequest, errUnknownDevice)
}

// inboxOnly is a /sync filter asking for nothing but the device's to-device
// messages, as the daemon's inbox reads ask (zooid/e2ee InboxFilter, not
// imported: this package builds without -tags goolm, which zooid/e2ee needs).
const inboxOnly = `{"room":{"rooms":[]},"presence":{"not_types":["*"]},"account_data":{"not_types":["*"]}}`
