//go:build goolm

package e2ee

import (
	"fmt"

	// Imported for its init, which registers goolm as olm's implementation.
	_ "maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/olm"
)

// Olm names the olm implementation linked into the daemon and its version,
// for the start-up log and errors.
func Olm() string {
	if olm.GetVersion == nil {
		return "no olm registered"
	}
	major, minor, patch := olm.GetVersion()
	return fmt.Sprintf("goolm %d.%d.%d", major, minor, patch)
}
