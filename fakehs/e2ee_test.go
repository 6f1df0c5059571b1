package fakehs

import (
	"context"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// mautrix's own key and to-device calls (the ones its crypto machine makes) work against the
// fake, and what they stored outlives a stop and restart: keys are queried and claimed, and
// a to-device message waits in /sync, as before.
func TestE2EEThroughMautrixSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	s := New(t)
	alice := newClient(t, s, "alice")
	bob := newClient(t, s, "bob")
	otk := id.NewKeyID(id.KeyAlgorithmSignedCurve25519, "AAAAAQ")
	up, err := alice.UploadKeys(ctx, &mautrix.ReqUploadKeys{
		DeviceKeys: &mautrix.DeviceKeys{
			UserID: alice.UserID, DeviceID: alice.DeviceID,
			Algorithms: []id.Algorithm{id.AlgorithmOlmV1, id.AlgorithmMegolmV1},
			Keys:       mautrix.KeyMap{id.NewDeviceKeyID(id.KeyAlgorithmEd25519, alice.DeviceID): "ed-key"},
		},
		OneTimeKeys: map[id.KeyID]mautrix.OneTimeKey{otk: {Key: "otk-key"}},
	})
	if err != nil || up.OneTimeKeyCounts.SignedCurve25519 != 1 {
		t.Fatalf("UploadKeys = %+v, %v; want 1 signed_curve25519 key counted", up, err)
	}
	if _, err := bob.SendToDevice(ctx, event.Type{Type: "org.example.ping", Class: event.ToDeviceEventType}, &mautrix.ReqSendToDevice{
		Messages: map[id.UserID]map[id.DeviceID]*event.Content{alice.UserID: {alice.DeviceID: {Raw: map[string]any{"body": "ping"}}}},
	}); err != nil {
		t.Fatalf("SendToDevice: %v", err)
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	// Connections kept alive from before the stop were closed by it.
	alice.Client.CloseIdleConnections()
	bob.Client.CloseIdleConnections()

	q, err := bob.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: mautrix.DeviceKeysRequest{alice.UserID: {}}})
	if err != nil {
		t.Fatalf("QueryKeys after the restart: %v", err)
	}
	if keys, ok := q.DeviceKeys[alice.UserID][alice.DeviceID]; !ok || keys.Keys[id.NewDeviceKeyID(id.KeyAlgorithmEd25519, alice.DeviceID)] != "ed-key" {
		t.Fatalf("alice's device keys after the restart: %+v, want her ed25519 key", q.DeviceKeys)
	}
	c, err := bob.ClaimKeys(ctx, &mautrix.ReqClaimKeys{OneTimeKeys: mautrix.OneTimeKeysRequest{
		alice.UserID: {alice.DeviceID: id.KeyAlgorithmSignedCurve25519}}})
	if err != nil {
		t.Fatalf("ClaimKeys after the restart: %v", err)
	}
	if k, ok := c.OneTimeKeys[alice.UserID][alice.DeviceID][otk]; !ok || k.Key != "otk-key" {
		t.Fatalf("claimed after the restart: %+v, want %s", c.OneTimeKeys, otk)
	}
	sync, err := alice.SyncRequest(ctx, 0, "", "", false, "")
	if err != nil {
		t.Fatalf("alice's sync after the restart: %v", err)
	}
	if n := len(sync.ToDevice.Events); n != 1 || sync.ToDevice.Events[0].Sender != bob.UserID {
		t.Fatalf("alice's to-device events after the restart: %d, want bob's one", n)
	}
	if sync.DeviceOTKCount.SignedCurve25519 != 0 {
		t.Fatalf("alice's one-time key count after the claim: %d, want 0", sync.DeviceOTKCount.SignedCurve25519)
	}
}
