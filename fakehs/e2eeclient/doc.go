// Package e2eeclient gives a Matrix user of the test harness a device with
// end-to-end encryption, as Element gives a person one: mautrix-go's own
// crypto (OlmMachine, olm and megolm from its pure-Go goolm) over a
// mautrix client talking HTTP to the homeserver, fakehs or Synapse alike.
// A Device uploads its device and one-time keys, tracks the devices of the
// rooms' members, shares a megolm session with them when it sends, takes room
// keys from the to-device events of its /sync, and decrypts m.room.encrypted
// events, waiting for a key that comes late.
//
// mautrix v0.32 links libolm through cgo unless built with the goolm tag, so
// this package's code builds only with -tags goolm (scripts/test.sh passes
// it); without the tag the package is empty and its one test says so.
package e2eeclient
