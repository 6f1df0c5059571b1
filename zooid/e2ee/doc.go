// Package e2ee is the daemon's end-to-end encryption (behaviour §10, issue
// 37): mautrix's crypto package with its pure-Go olm and megolm (goolm), so
// the daemon stays one static binary without cgo or the C libolm.
//
// mautrix v0.32 registers the C libolm through cgo unless built with
// -tags goolm, so this package builds only with that tag: a build without it
// stops here with the reason (needs_goolm.go) instead of linking libolm or
// failing deep inside mautrix.
package e2ee
