//go:build !linux

package netjail

import (
	"fmt"
	"io"
)

// Supported says whether this process can make network namespaces: never
// off Linux.
func Supported() bool { return false }

// Main refuses: network namespaces are Linux's.
func Main(_ []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "netjail: network namespaces need Linux")
	return 1
}
