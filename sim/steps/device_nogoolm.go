//go:build !goolm

package steps

import (
	"context"
	"fmt"
	"log/slog"

	"maunium.net/go/mautrix/id"
)

// newHumanDevice refuses: mautrix v0.32's crypto links libolm through cgo
// unless built with the goolm tag, and this harness was built without it.
func newHumanDevice(_ context.Context, _ string, uid id.UserID, _ string, _ *slog.Logger) (humanDevice, error) {
	return nil, fmt.Errorf("%s cannot have an encryption device: this harness was built without -tags goolm (mautrix's pure-Go olm); build it with go build -tags goolm", uid)
}
