//go:build !goolm

package e2eeclient

import "testing"

// TestBuiltWithGoolm fails a run of this package's tests without the goolm
// tag, which would otherwise compile none of them: mautrix v0.32's crypto
// registers libolm (cgo and the C olm library) unless built with -tags goolm,
// and the harness's devices use the pure-Go goolm.
func TestBuiltWithGoolm(t *testing.T) {
	t.Fatal("fakehs/e2eeclient needs -tags goolm (mautrix's pure-Go olm); scripts/test.sh passes it")
}
