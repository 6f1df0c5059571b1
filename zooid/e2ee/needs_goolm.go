//go:build !goolm

package e2ee

// Without the tag mautrix would link the C libolm through cgo (or, with
// CGO_ENABLED=0, fail inside mautrix with no word of why); this line fails
// the build here, its message the reason and the fix.
var _ int = "zooid must be built with -tags goolm (mautrix's crypto in pure Go): go build -tags goolm ./cmd/zooid"
