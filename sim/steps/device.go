package steps

import (
	"context"

	"maunium.net/go/mautrix/id"
)

// humanDevice is a human's end-to-end encryption device: mautrix's crypto
// over the human's own login (fakehs/e2eeclient), in a harness built with
// -tags goolm (device_goolm.go); without the tag newHumanDevice says so.
type humanDevice interface {
	SendText(ctx context.Context, room id.RoomID, text string) (id.EventID, error)
	ReadText(ctx context.Context, room id.RoomID, eventID id.EventID) (string, error)
	Close() error
}
