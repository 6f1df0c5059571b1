//go:build !linux

package main

// hardenProcess has nothing to do where /proc does not expose environments.
func hardenProcess() error { return nil }
