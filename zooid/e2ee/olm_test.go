//go:build goolm

package e2ee

import (
	"strings"
	"testing"
)

// TestOlmIsGoolm holds the daemon to mautrix's pure-Go olm: a build that
// registered the C libolm would name it here.
func TestOlmIsGoolm(t *testing.T) {
	if got := Olm(); !strings.HasPrefix(got, "goolm ") {
		t.Errorf("Olm() = %q; want goolm's name and version", got)
	}
}
