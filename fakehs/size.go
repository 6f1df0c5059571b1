package fakehs

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"maunium.net/go/mautrix/id"
)

// maxPDUSize is Synapse's MAX_PDU_SIZE: an event whose whole PDU, in
// canonical JSON, is longer than this is refused with 413 M_TOO_LARGE.
const maxPDUSize = 65536

// pduStandIn holds stand-ins, of the length Synapse's own values have in a
// current room version, for the PDU fields fakehs does not keep: Synapse
// measures the signed federation form of the event (auth_events,
// prev_events, depth, hashes, signatures), not what a client sends or reads.
var pduStandIn = struct {
	eventID, hash, sig, keyID string
}{
	eventID: "$" + strings.Repeat("A", 43), // a v4+ event id: "$" + unpadded base64 of a sha256
	hash:    strings.Repeat("A", 43),
	sig:     strings.Repeat("A", 86),
	keyID:   "ed25519:a_AAAA",
}

// pduSize is how long Synapse would find the event's PDU: the event's own
// fields and content in compact JSON without HTML escaping (as canonical
// JSON writes them), plus three auth events, one prev event, a depth, a
// sha256 hash and one signature. Go's encoder escapes U+2028/U+2029 and a few
// control characters longer than Python's canonicaljson does, so fakehs may
// count a few bytes more than Synapse for such text, never fewer.
func pduSize(rm *room, sender id.UserID, typ string, stateKey *string, content json.RawMessage) int {
	var c any
	if err := json.Unmarshal(content, &c); err != nil {
		return len(content)
	}
	server := sender.Homeserver()
	pdu := map[string]any{
		"auth_events":      []string{pduStandIn.eventID, pduStandIn.eventID, pduStandIn.eventID},
		"prev_events":      []string{pduStandIn.eventID},
		"content":          c,
		"depth":            1000000,
		"hashes":           map[string]string{"sha256": pduStandIn.hash},
		"origin_server_ts": int64(1_700_000_000_000),
		"room_id":          rm.ID,
		"sender":           sender,
		"signatures":       map[string]any{server: map[string]string{pduStandIn.keyID: pduStandIn.sig}},
		"type":             typ,
		"unsigned":         map[string]any{},
	}
	if stateKey != nil {
		pdu["state_key"] = *stateKey
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(pdu); err != nil {
		return len(content)
	}
	return buf.Len() - 1 // Encode's trailing newline
}

// checkSize refuses an event whose PDU would be over Synapse's limit, with
// Synapse's 413 M_TOO_LARGE "event too large".
func checkSize(rm *room, sender id.UserID, typ string, stateKey *string, content json.RawMessage) error {
	if pduSize(rm, sender, typ, stateKey, content) > maxPDUSize {
		return mErr(http.StatusRequestEntityTooLarge, "M_TOO_LARGE", "event too large")
	}
	return nil
}
