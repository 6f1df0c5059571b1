package matrix

import (
	"slices"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
)

// A daemon whose homeserver is not in a room yet joins it through the
// servers its alias and id name (features/federation.feature shows the join
// failing without them).
func TestViaNamesTheServersOfTheAliasAndTheRoomID(t *testing.T) {
	cases := []struct {
		room   config.RoomRef
		roomID id.RoomID
		want   []string
	}{
		{"#ops:hs1.example:8448", "!abc:hs2.example", []string{"hs1.example:8448", "hs2.example"}},
		{"#ops:localhost:23184", "!abc:localhost:23184", []string{"localhost:23184"}},
		{"!abc:hs2.example", "!abc:hs2.example", []string{"hs2.example"}},
		// A version 12 room's id names no server: the alias's is all there is.
		{"#ops:hs1.example", "!AbCdEfGhIjKlMnOp", []string{"hs1.example"}},
	}
	for _, c := range cases {
		if got := via(c.room, c.roomID); !slices.Equal(got, c.want) {
			t.Errorf("via(%s, %s) = %q, want %q", c.room, c.roomID, got, c.want)
		}
	}
}
