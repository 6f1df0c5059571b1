package steps

import (
	"context"
	"testing"
)

// The room tools answer from the daemon's room state (zooid/roomstate):
// once a room's state is read, a call of zooid_get_room_info,
// zooid_get_members or zooid_get_rooms asks the homeserver nothing (before
// the room state, 2, 2 and 3 requests a call). Each call is counted alone
// (MeasureRoomToolRequests).
func TestRoomToolsAskTheHomeserverNothing(t *testing.T) {
	got, err := MeasureRoomToolRequests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range RoomTools {
		if n, ok := got[tool]; !ok || n != 0 {
			t.Errorf("%s asked the homeserver %d times (measured: %t), want 0", tool, n, ok)
		}
	}
}
