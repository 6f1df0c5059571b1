//go:build goolm

package steps

import (
	"context"
	"fmt"
	"log/slog"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs/e2eeclient"
	"github.com/zooid-dev/zooid/zooid/e2ee"
)

// newHumanDevice gives the human logged in with tok a device: the login's
// own device id (asked of /whoami), its keys uploaded, its /sync loop
// running on a client of its own until Close; mautrix's crypto log (info and
// above: a device a room key skipped, say) goes to log.
func newHumanDevice(ctx context.Context, baseURL string, uid id.UserID, tok string, log *slog.Logger) (humanDevice, error) {
	cli, err := mautrix.NewClient(baseURL, uid, tok)
	if err != nil {
		return nil, fmt.Errorf("a device's client for %s: %w", uid, err)
	}
	who, err := cli.Whoami(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking the homeserver which device %s's login is: %w", uid, err)
	}
	if who.DeviceID == "" {
		return nil, fmt.Errorf("the homeserver names no device for %s's login: a device needs one", uid)
	}
	cli.DeviceID = who.DeviceID
	dev, err := e2eeclient.New(ctx, cli, e2ee.Zerolog(log.With("device_of", string(uid))))
	if err != nil {
		return nil, err
	}
	return mautrixDevice{dev}, nil
}

// mautrixDevice is an e2eeclient.Device as the steps use it.
type mautrixDevice struct{ *e2eeclient.Device }

func (m mautrixDevice) SendTextKeyLater(ctx context.Context, room id.RoomID, text string) (id.EventID, func(context.Context) error, error) {
	evt, key, err := m.Device.SendTextKeyLater(ctx, room, text)
	if err != nil {
		return "", nil, err
	}
	return evt, func(ctx context.Context) error { return m.DeliverKey(ctx, key) }, nil
}
