//go:build !(linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64))

package unixuser

import (
	"errors"
	"os"
)

var errUnsupported = errors.New("per-agent users need Linux on a 64-bit platform (per-thread filesystem identity and socket peer checks)")

// As fails here: without per-thread filesystem ids the daemon can't ask the
// kernel what another user may reach.
func As(u User, fn func() error) error { return errUnsupported }

// Privileged fails here: see As.
func Privileged() error { return errUnsupported }

func openRead(path string) (*os.File, error) { return nil, errUnsupported }
func statOK(path string) bool                { return false }
func execOK(path string) bool                { return false }
