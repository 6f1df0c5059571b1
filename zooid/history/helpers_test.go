package history

import (
	"encoding/json"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

func idU(s string) id.UserID  { return id.UserID(s) }
func idR(s string) id.RoomID  { return id.RoomID(s) }
func idE(s string) id.EventID { return id.EventID(s) }

func msgEvent(raw string) *event.Event {
	var evt event.Event
	data, _ := json.Marshal(map[string]any{"type": "m.room.message", "event_id": "$e", "sender": "@a:x", "content": json.RawMessage(raw)})
	if err := json.Unmarshal(data, &evt); err != nil {
		panic(err)
	}
	return &evt
}
