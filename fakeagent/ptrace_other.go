//go:build !linux

package fakeagent

import "errors"

// ptraceAttach is Linux's alone here.
func ptraceAttach(int) error { return errors.New("ptrace probes need Linux") }
