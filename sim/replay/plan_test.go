package replay

import "testing"

// A prompt recorded on one server matches the same prompt on another: the
// header's room alias, room and event ids and user ids are masked; its words
// are not.
func TestMaskTakesOutWhatDiffersBetweenServers(t *testing.T) {
	fake := "[zooid] room: #ops:localhost (!abcdefgh:localhost) · thread: $aaaaaaaaaaaa · from: ori (@ori:localhost)\n\nand svc-b?"
	synapse := "[zooid] room: #ops-s7c2e:localhost (!zyxwvuts:localhost) · thread: $bbbbbbbbbbbbbbbb · from: ori (@h3f9a-ori:localhost)\n\nand svc-b?"
	if mask(fake) != mask(synapse) {
		t.Fatalf("masks differ:\n%q\n%q", mask(fake), mask(synapse))
	}
	if other := synapse[:len(synapse)-2] + "c?"; mask(other) == mask(fake) {
		t.Fatalf("a different message masks the same: %q", mask(other))
	}
}
