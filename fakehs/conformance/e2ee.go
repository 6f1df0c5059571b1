package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"maunium.net/go/mautrix/event"
)

// The homeserver's part of end-to-end encryption, as mautrix's crypto will use it: device
// and one-time keys (/keys/upload, /keys/query, /keys/claim with fallback keys), to-device
// messages in /sync until the next since token acknowledges them, key counts and device
// list changes in /sync, and encrypted rooms' events stored like any other. The keys here
// are opaque strings: a homeserver checks no key or signature, and neither does the suite.

// deviceKeysOf is a device's identity keys as a client uploads them.
func deviceKeysOf(c *Client) map[string]any {
	dev := string(c.DeviceID)
	return map[string]any{
		"user_id":    c.UserID,
		"device_id":  c.DeviceID,
		"algorithms": []string{"m.olm.v1.curve25519-aes-sha2", "m.megolm.v1.aes-sha2"},
		"keys": map[string]any{
			"curve25519:" + dev: "curve-" + dev,
			"ed25519:" + dev:    "ed-" + dev,
		},
		"signatures": map[string]any{string(c.UserID): map[string]any{"ed25519:" + dev: "sig-" + dev}},
	}
}

// oneTimeKey is a signed_curve25519 key as a client uploads it; fallback marks a fallback key.
func oneTimeKey(c *Client, key string, fallback bool) map[string]any {
	k := map[string]any{
		"key":        key,
		"signatures": map[string]any{string(c.UserID): map[string]any{"ed25519:" + string(c.DeviceID): "sig-" + key}},
	}
	if fallback {
		k["fallback"] = true
	}
	return k
}

// sameJSON says whether got holds the same JSON value as want.
func sameJSON(got gjson.Result, want any) bool {
	var g, w any
	if json.Unmarshal([]byte(got.Raw), &g) != nil {
		return false
	}
	b, err := json.Marshal(want)
	if err != nil || json.Unmarshal(b, &w) != nil {
		return false
	}
	return reflect.DeepEqual(g, w)
}

// syncOnce is one /sync that returns at once. Its filter is new each time: Synapse answers a
// request the same as one before it (user, since, filter, …) from its sync response cache
// for minutes, which would hide what changed in between.
func syncOnce(t testing.TB, c *Client, since string) gjson.Result {
	t.Helper()
	filter := fmt.Sprintf(`{"room":{"timeline":{"limit":1,"not_types":["org.example.nonce.%s"]}}}`, randomID(6))
	opts := []ReqOpt{WithQuery("timeout", "0"), WithQuery("filter", filter)}
	if since != "" {
		opts = append(opts, WithQuery("since", since))
	}
	return c.MustDo(t, "GET", CS("v3", "sync"), nil, opts...)
}

// toDeviceEvents are a /sync response's to-device events of type typ.
func toDeviceEvents(res gjson.Result, typ string) []gjson.Result {
	var out []gjson.Result
	for _, ev := range res.Get("to_device.events").Array() {
		if ev.Get("type").String() == typ {
			out = append(out, ev)
		}
	}
	return out
}

// userList is a JSON array of user ids as strings.
func userList(res gjson.Result) []string {
	var out []string
	for _, u := range res.Array() {
		out = append(out, u.String())
	}
	return out
}

func (s *suite) testE2EE(t *testing.T) {
	t.Parallel()

	t.Run("KeysUploadCountsAndQuery", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "keysa")
		bob := s.registerUser(t, "keysb")
		upload := CS("v3", "keys", "upload")

		// Device keys alone: the count of signed_curve25519 keys is there, at zero.
		res := alice.MustDo(t, "POST", upload, map[string]any{"device_keys": deviceKeysOf(alice)})
		MatchJSON(t, "upload of device keys", res, KeyEqual("one_time_key_counts.signed_curve25519", 0))

		otks := map[string]any{
			"signed_curve25519:AAAAAQ": oneTimeKey(alice, "otk-1", false),
			"signed_curve25519:AAAAAg": oneTimeKey(alice, "otk-2", false),
		}
		res = alice.MustDo(t, "POST", upload, map[string]any{"one_time_keys": otks})
		MatchJSON(t, "upload of two one-time keys", res, KeyEqual("one_time_key_counts.signed_curve25519", 2))
		// The same keys again are no new keys; a known key id with other content is refused.
		res = alice.MustDo(t, "POST", upload, map[string]any{"one_time_keys": otks})
		MatchJSON(t, "the same one-time keys again", res, KeyEqual("one_time_key_counts.signed_curve25519", 2))
		clash := alice.Do(t, "POST", upload, map[string]any{"one_time_keys": map[string]any{
			"signed_curve25519:AAAAAQ": oneTimeKey(alice, "otk-other", false)}})
		MustStatus(t, clash, http.StatusBadRequest, "M_UNKNOWN")

		// Anyone may query: an empty list asks for every device.
		q := bob.MustDo(t, "POST", CS("v3", "keys", "query"), map[string]any{"device_keys": map[string]any{string(alice.UserID): []string{}}})
		MatchJSON(t, "keys/query", q, KeyPresent("failures"))
		if f := q.Get("failures"); len(f.Map()) != 0 {
			t.Fatalf("keys/query of a local user has failures: %s", f.Raw)
		}
		devs := field(q.Get("device_keys"), string(alice.UserID))
		if n := len(devs.Map()); n != 1 {
			t.Fatalf("keys/query lists %d devices of alice, want her one: %s", n, q.Raw)
		}
		got := field(devs, string(alice.DeviceID))
		want := deviceKeysOf(alice)
		for _, k := range []string{"user_id", "device_id", "algorithms", "keys", "signatures"} {
			if !sameJSON(got.Get(k), want[k]) {
				t.Fatalf("alice's device keys %s = %s, want it as uploaded: %v", k, got.Get(k).Raw, want[k])
			}
		}
		// Asking for a device she does not have answers her, without devices.
		q = bob.MustDo(t, "POST", CS("v3", "keys", "query"), map[string]any{"device_keys": map[string]any{string(alice.UserID): []string{"NOSUCHDEVICE"}}})
		if devs := field(q.Get("device_keys"), string(alice.UserID)); !devs.Exists() || len(devs.Map()) != 0 {
			t.Fatalf("keys/query for a device alice lacks: %s, want her with no devices", q.Raw)
		}
	})

	t.Run("ClaimTakesEachOneTimeKeyOnceThenTheFallback", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "claima")
		bob := s.registerUser(t, "claimb")
		otks := map[string]any{
			"signed_curve25519:AAAAAQ": oneTimeKey(alice, "otk-1", false),
			"signed_curve25519:AAAAAg": oneTimeKey(alice, "otk-2", false),
		}
		fallback := oneTimeKey(alice, "fallback-1", true)
		alice.MustDo(t, "POST", CS("v3", "keys", "upload"), map[string]any{
			"device_keys": deviceKeysOf(alice), "one_time_keys": otks,
			"fallback_keys": map[string]any{"signed_curve25519:AAAAAw": fallback},
		})
		first := syncOnce(t, alice, "")
		MatchJSON(t, "alice's sync after the upload", first, KeyEqual("device_one_time_keys_count.signed_curve25519", 2))
		MustEqualStrings(t, "unused fallback key types", userList(first.Get("device_unused_fallback_key_types")), []string{"signed_curve25519"})

		claim := func() (string, gjson.Result) {
			res := bob.MustDo(t, "POST", CS("v3", "keys", "claim"), map[string]any{"one_time_keys": map[string]any{
				string(alice.UserID): map[string]any{string(alice.DeviceID): "signed_curve25519"}}})
			keys := field(field(res.Get("one_time_keys"), string(alice.UserID)), string(alice.DeviceID)).Map()
			if len(keys) != 1 {
				t.Fatalf("claim answered %d keys for alice's device, want 1: %s", len(keys), res.Raw)
			}
			for k, v := range keys {
				return k, v
			}
			return "", gjson.Result{}
		}
		var claimed []string
		for range 2 {
			keyID, key := claim()
			want, ok := otks[keyID]
			if !ok || slices.Contains(claimed, keyID) {
				t.Fatalf("claimed %s (claimed before: %v), want one of the two one-time keys not claimed yet", keyID, claimed)
			}
			if !sameJSON(key, want) {
				t.Fatalf("claimed %s = %s, want it as uploaded: %v", keyID, key.Raw, want)
			}
			claimed = append(claimed, keyID)
		}
		// With the one-time keys gone, the fallback key is handed out, and again.
		for i := range 2 {
			keyID, key := claim()
			if keyID != "signed_curve25519:AAAAAw" || !sameJSON(key, fallback) {
				t.Fatalf("claim %d after the one-time keys ran out: %s = %s, want the fallback key", i+1, keyID, key.Raw)
			}
		}
		after := syncOnce(t, alice, "")
		MatchJSON(t, "alice's sync after the claims", after, KeyEqual("device_one_time_keys_count.signed_curve25519", 0))
		MustEqualStrings(t, "unused fallback key types after it was claimed", userList(after.Get("device_unused_fallback_key_types")), nil)

		// A device without a fallback key has nothing to hand out once its key is gone.
		carol := s.registerUser(t, "claimc")
		carol.MustDo(t, "POST", CS("v3", "keys", "upload"), map[string]any{
			"one_time_keys": map[string]any{"signed_curve25519:AAAAAQ": oneTimeKey(carol, "otk-c", false)}})
		req := map[string]any{"one_time_keys": map[string]any{string(carol.UserID): map[string]any{string(carol.DeviceID): "signed_curve25519"}}}
		res := bob.MustDo(t, "POST", CS("v3", "keys", "claim"), req)
		if n := len(field(field(res.Get("one_time_keys"), string(carol.UserID)), string(carol.DeviceID)).Map()); n != 1 {
			t.Fatalf("first claim of carol's key: %s", res.Raw)
		}
		res = bob.MustDo(t, "POST", CS("v3", "keys", "claim"), req)
		if keys := field(field(res.Get("one_time_keys"), string(carol.UserID)), string(carol.DeviceID)); len(keys.Map()) != 0 {
			t.Fatalf("second claim of carol's only key handed out %s, want nothing", res.Raw)
		}
		MatchJSON(t, "a claim with nothing to hand out", res, KeyPresent("failures"))
	})

	t.Run("ToDeviceInSyncUntilTheNextSince", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "todeva")
		bob := s.registerUser(t, "todevb")
		typ := "org.example.zooid.ping"
		n0 := syncOnce(t, alice, "").Get("next_batch").String()

		l := s.label(t, 2)
		put := func(txn string, target string, body string) {
			bob.MustDo(t, "PUT", CS("v3", "sendToDevice", typ, txn), map[string]any{"messages": map[string]any{
				string(alice.UserID): map[string]any{target: map[string]any{"body": body}}}})
		}
		txn := "conf-" + randomID(8)
		put(txn, string(alice.DeviceID), l[0])
		put(txn, string(alice.DeviceID), l[0]) // the same txn id: sent once
		put("conf-"+randomID(8), "*", l[1])    // every device of alice's

		first := syncOnce(t, alice, n0)
		evs := toDeviceEvents(first, typ)
		var got []string
		for _, ev := range evs {
			MatchJSON(t, "a to-device event", ev, KeyEqual("sender", string(bob.UserID)), KeyEqual("type", typ))
			got = append(got, ev.Get("content.body").String())
		}
		MustEqualStrings(t, "to-device messages since n0", got, l)
		n1 := first.Get("next_batch").String()

		// The same since again gets them again: nothing acknowledged them yet.
		if again := toDeviceEvents(syncOnce(t, alice, n0), typ); len(again) != 2 {
			t.Fatalf("a repeated sync since n0 got %d to-device messages, want the 2 again", len(again))
		}
		// Syncing with the next since token acknowledges them: they are dropped, for good.
		if next := toDeviceEvents(syncOnce(t, alice, n1), typ); len(next) != 0 {
			t.Fatalf("sync since n1 got %d to-device messages, want none", len(next))
		}
		// Synapse drops them in a task of its own, soon after.
		eventually(t, 10*time.Second, "the acknowledged to-device messages dropped", func() (bool, string) {
			old := toDeviceEvents(syncOnce(t, alice, n0), typ)
			return len(old) == 0, fmt.Sprintf("sync since n0 after n1 was used got %d to-device messages, want none", len(old))
		})
	})

	t.Run("ToDeviceWakesALongPoll", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "wakea")
		bob := s.registerUser(t, "wakeb")
		typ := "org.example.zooid.wake"
		n0 := syncOnce(t, alice, "").Get("next_batch").String()
		const poll = 20 * time.Second
		type result struct {
			res *Response
			err error
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			filter := fmt.Sprintf(`{"room":{"timeline":{"limit":1,"not_types":["org.example.nonce.%s"]}}}`, randomID(6))
			res, err := alice.DoCtx(t.Context(), "GET", CS("v3", "sync"), nil, WithQuery("since", n0), WithQuery("filter", filter),
				WithQuery("timeout", fmt.Sprint(poll.Milliseconds())), WithTimeout(poll+10*time.Second))
			done <- result{res, err}
		}()
		// Give the long poll time to be parked before the message that must wake it.
		time.Sleep(time.Second)
		bob.MustDo(t, "PUT", CS("v3", "sendToDevice", typ, "conf-"+randomID(8)), map[string]any{"messages": map[string]any{
			string(alice.UserID): map[string]any{string(alice.DeviceID): map[string]any{"body": "wake up"}}}})
		r := <-done
		if r.err != nil {
			t.Fatalf("long-poll sync: %v", r.err)
		}
		MustStatus(t, r.res, http.StatusOK, "")
		if waited := time.Since(start); waited > poll-2*time.Second {
			t.Fatalf("the long poll was not woken by the to-device message (waited %s)", waited)
		}
		if evs := toDeviceEvents(r.res.JSON(), typ); len(evs) != 1 || evs[0].Get("content.body").String() != "wake up" {
			t.Fatalf("the woken sync's to-device events of %s: %v, want the one sent: %s", typ, evs, truncate(r.res.JSON().Raw, 1000))
		}
	})

	t.Run("DeviceListsChangedAndLeft", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "devlista", "devlistb")
		n0 := syncOnce(t, alice, "").Get("next_batch").String()
		bob.MustDo(t, "POST", CS("v3", "keys", "upload"), map[string]any{"device_keys": deviceKeysOf(bob)})
		var changed []string
		var n1 string
		eventually(t, 10*time.Second, "bob in alice's device_lists.changed", func() (bool, string) {
			res := syncOnce(t, alice, n0)
			changed, n1 = userList(res.Get("device_lists.changed")), res.Get("next_batch").String()
			return slices.Contains(changed, string(bob.UserID)), fmt.Sprintf("changed %v", changed)
		})
		bob.MustDo(t, "POST", CS("v3", "rooms", string(room), "leave"), map[string]any{})
		var left []string
		eventually(t, 10*time.Second, "bob in alice's device_lists.left", func() (bool, string) {
			res := syncOnce(t, alice, n1)
			left = userList(res.Get("device_lists.left"))
			return slices.Contains(left, string(bob.UserID)), fmt.Sprintf("left %v in %s", left, truncate(res.Raw, 500))
		})
	})

	// A user who comes to share a room is in device_lists.changed, keys changed or not: a
	// client that tracked their devices while they shared no room was told of no change
	// since (mautrix's crypto keeps the old list through a left), and must query again
	// before it shares a room key with them.
	t.Run("DeviceListsChangedWhenARoomIsNewlyShared", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "devjoina")
		bob := s.registerUser(t, "devjoinb")
		for _, c := range []*Client{alice, bob} {
			c.MustDo(t, "POST", CS("v3", "keys", "upload"), map[string]any{"device_keys": deviceKeysOf(c)})
		}
		room := s.createRoom(t, alice, map[string]any{"preset": "public_chat"})
		n0 := syncOnce(t, alice, "").Get("next_batch").String()
		bob.MustDo(t, "POST", CS("v3", "join", string(room)), map[string]any{})
		var changed []string
		eventually(t, 10*time.Second, "bob, newly in a room with alice, in alice's device_lists.changed", func() (bool, string) {
			res := syncOnce(t, alice, n0)
			changed = userList(res.Get("device_lists.changed"))
			return slices.Contains(changed, string(bob.UserID)), fmt.Sprintf("changed %v in %s", changed, truncate(res.Raw, 500))
		})
		// Synapse does not look at the membership before a join: a display name bob changes
		// names him again (a client queries once more, which costs nothing wrong).
		var nName string
		eventually(t, 10*time.Second, "alice's sync past bob's join", func() (bool, string) {
			res := syncOnce(t, alice, n0)
			nName = res.Get("next_batch").String()
			return slices.Contains(userList(res.Get("device_lists.changed")), string(bob.UserID)), "bob's join not yet in alice's sync"
		})
		name := "Bob " + randomID(3)
		bob.MustDo(t, "PUT", CS("v3", "rooms", string(room), "state", "m.room.member", string(bob.UserID)),
			map[string]any{"membership": "join", "displayname": name})
		eventually(t, 10*time.Second, "bob's new display name in alice's sync", func() (bool, string) {
			res := syncOnce(t, alice, nName)
			for _, e := range field(res.Get("rooms.join"), string(room)).Get("timeline.events").Array() {
				if e.Get("type").String() == "m.room.member" && e.Get("content.displayname").String() == name {
					if got := userList(res.Get("device_lists.changed")); !slices.Contains(got, string(bob.UserID)) {
						t.Fatalf("the sync showing bob's display name change has device_lists.changed %v, want bob in it as Synapse puts him", got)
					}
					return true, ""
				}
			}
			return false, truncate(res.Raw, 500)
		})

		// And the other way round: bob, who left and joins another of alice's rooms, is told
		// of alice, whom he shares a room with again.
		other := s.createRoom(t, alice, map[string]any{"preset": "public_chat"})
		bob.MustDo(t, "POST", CS("v3", "rooms", string(room), "leave"), map[string]any{})
		n1 := syncOnce(t, bob, "").Get("next_batch").String()
		bob.MustDo(t, "POST", CS("v3", "join", string(other)), map[string]any{})
		eventually(t, 10*time.Second, "alice, in a room with bob again, in bob's device_lists.changed", func() (bool, string) {
			res := syncOnce(t, bob, n1)
			changed = userList(res.Get("device_lists.changed"))
			return slices.Contains(changed, string(alice.UserID)), fmt.Sprintf("changed %v in %s", changed, truncate(res.Raw, 500))
		})
	})

	t.Run("EncryptedRoomEventsAreStoredAndServed", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "encra")
		bob := s.registerUser(t, "encrb")
		room := s.createRoom(t, alice, map[string]any{"preset": "public_chat", "initial_state": []any{map[string]any{
			"type": "m.room.encryption", "state_key": "", "content": map[string]any{"algorithm": "m.megolm.v1.aes-sha2"}}}})
		st := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "state", "m.room.encryption", ""), nil)
		MatchJSON(t, "the room's m.room.encryption", st, KeyEqual("algorithm", "m.megolm.v1.aes-sha2"))
		bob.MustDo(t, "POST", CS("v3", "join", string(room)), map[string]any{})
		n0 := syncOnce(t, alice, "").Get("next_batch").String()

		content := map[string]any{
			"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEnQ0cGFxdWUtY2lwaGVydGV4dA",
			"session_id": "conf-session", "sender_key": "conf-sender-key", "device_id": string(bob.DeviceID),
		}
		evID := s.send(t, bob, room, event.EventEncrypted, content)
		ev := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "event", string(evID)), nil)
		MatchJSON(t, "the encrypted event", ev, KeyEqual("type", "m.room.encrypted"), KeyEqual("sender", string(bob.UserID)))
		if !sameJSON(ev.Get("content"), content) {
			t.Fatalf("the encrypted event's content is %s, want it as sent: %v", ev.Get("content").Raw, content)
		}
		msgs := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "b"), WithQuery("limit", "1"))
		MustEqualStrings(t, "the newest event in /messages", jsonEventIDs(msgs.Get("chunk").Array()), []string{string(evID)})
		var inSync []string
		eventually(t, 10*time.Second, "the encrypted event in alice's sync", func() (bool, string) {
			res := syncOnce(t, alice, n0)
			inSync = inSync[:0]
			for _, e := range field(res.Get("rooms.join"), string(room)).Get("timeline.events").Array() {
				if e.Get("type").String() == "m.room.encrypted" && sameJSON(e.Get("content"), content) {
					inSync = append(inSync, e.Get("event_id").String())
				}
			}
			return len(inSync) > 0, fmt.Sprintf("encrypted events %v", inSync)
		})
		MustEqualStrings(t, "encrypted events in the sync timeline", inSync, []string{string(evID)})

		// A room turns encrypted mid-conversation with the state event.
		plain := s.createRoom(t, alice, map[string]any{"preset": "public_chat"})
		alice.MustDo(t, "PUT", CS("v3", "rooms", string(plain), "state", "m.room.encryption", ""), map[string]any{"algorithm": "m.megolm.v1.aes-sha2"})
		MatchJSON(t, "m.room.encryption put in a plain room", alice.MustDo(t, "GET", CS("v3", "rooms", string(plain), "state", "m.room.encryption", ""), nil),
			KeyEqual("algorithm", "m.megolm.v1.aes-sha2"))
	})
}
