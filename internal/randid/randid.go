// Package randid makes the random names and secrets the harness and the
// doubles hand out (tokens, run ids, passwords of test users).
package randid

import (
	"crypto/rand"
	"encoding/hex"
)

// Hex returns n random bytes as 2n hex digits. crypto/rand.Read does not
// fail (since Go 1.24 it crashes the program rather than return an error),
// so neither does Hex.
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
