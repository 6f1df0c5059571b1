//go:build race

package steps

// raceEnabled: this binary was built with -race, and so is the stand-in
// childExe builds.
const raceEnabled = true
