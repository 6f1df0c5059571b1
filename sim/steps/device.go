package steps

import (
	"context"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// humanDevice is a human's end-to-end encryption device: mautrix's crypto
// over the human's own login (fakehs/e2eeclient), in a harness built with
// -tags goolm (device_goolm.go); without the tag newHumanDevice says so.
type humanDevice interface {
	SendText(ctx context.Context, room id.RoomID, text string) (id.EventID, error)
	SendThreadReply(ctx context.Context, room id.RoomID, root id.EventID, text string) (id.EventID, error)
	// SendTextKeyLater sends text encrypted with a room key shared with no
	// one yet; deliver sends that key to the room's devices.
	SendTextKeyLater(ctx context.Context, room id.RoomID, text string) (evt id.EventID, deliver func(context.Context) error, err error)
	ReadText(ctx context.Context, room id.RoomID, eventID id.EventID) (string, error)
	// ReadTextNow decrypts with the keys the device holds now; noKey says
	// it holds none for the event.
	ReadTextNow(ctx context.Context, room id.RoomID, eventID id.EventID) (text string, noKey bool, err error)
	// Decrypt decrypts an m.room.encrypted event with the keys the device
	// holds now.
	Decrypt(ctx context.Context, evt *event.Event) (*event.Event, error)
	// RoomKeys are the megolm session keys the device sent messages with.
	RoomKeys() []string
	Close() error
}
