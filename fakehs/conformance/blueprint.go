package conformance

import (
	"testing"

	"maunium.net/go/mautrix/id"
)

// The blueprints most tests start from, as Complement's do: fresh users
// (localparts unique per run) in a fresh room, so tests sharing one
// homeserver never meet.

// aliceAlone registers alice (a localpart made from name) and creates a
// private room of hers.
func (s *suite) aliceAlone(t testing.TB, name string) (*Client, id.RoomID) {
	t.Helper()
	alice := s.registerUser(t, name)
	return alice, s.createRoom(t, alice, nil)
}

// aliceAndBob registers alice and bob (localparts made from the names) and
// joins bob to a public room alice creates.
func (s *suite) aliceAndBob(t testing.TB, aliceName, bobName string) (alice, bob *Client, room id.RoomID) {
	t.Helper()
	alice = s.registerUser(t, aliceName)
	bob = s.registerUser(t, bobName)
	return alice, bob, s.publicRoomWith(t, alice, bob)
}
