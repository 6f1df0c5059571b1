//go:build !linux

package testdeps

import "errors"

// probeLandlock: Landlock is Linux's.
func probeLandlock() error { return errors.New("Landlock is a Linux security module") }
