//go:build !race

package steps

// raceEnabled: this binary was built without -race.
const raceEnabled = false
