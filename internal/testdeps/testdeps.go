// Package testdeps holds the one rule for what a test needs from the machine
// it runs on (root, a Docker engine, the npm packages, chromium): where the
// developer does not have it, the test is left out with one line saying which
// dependency and how to get it; where the run asked for it — CI=true, or the
// dependency's own variable set — its absence fails the test. A green run in
// CI therefore skips nothing, and scripts/test.sh's summary
// (internal/testsummary) says so.
package testdeps

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Dependency is something a test needs from the machine.
type Dependency struct {
	// Name says what it is, as the skip and failure lines print it.
	Name string
	// Env names the variable that asks for it: any value but "" or "0"
	// makes its absence a failure.
	Env string
	// Get says how a developer gets it.
	Get string
	// Probe reports why the dependency is missing, or nil when it is there.
	Probe func() error
}

// Asked says whether this run asked for d: under CI=true every dependency is
// asked for, elsewhere only one whose variable is set (to anything but "0").
func (d Dependency) Asked() bool {
	if os.Getenv("CI") == "true" {
		return true
	}
	v := os.Getenv(d.Env)
	return v != "" && v != "0"
}

// Missing probes d and says whether the test should go on (err == nil),
// be left out (err != nil, fail false) or fail (fail true); err's text is the
// one line to print.
func (d Dependency) Missing() (err error, fail bool) {
	probe := d.Probe()
	if probe == nil {
		return nil, false
	}
	if d.Asked() {
		why := "CI=true"
		if os.Getenv("CI") != "true" {
			why = d.Env + "=" + os.Getenv(d.Env)
		}
		return fmt.Errorf("%s asks for %s, which is missing: %v (%s)", why, d.Name, probe, d.Get), true
	}
	return fmt.Errorf("left out: needs %s, which is missing here: %v (%s; %s=1 or CI=true makes this a failure)", d.Name, probe, d.Get, d.Env), false
}

// Require goes on when d is there, and otherwise skips t with one line, or
// fails it when the run asked for d.
func Require(t testing.TB, d Dependency) {
	t.Helper()
	err, fail := d.Missing()
	switch {
	case err == nil:
	case fail:
		t.Fatal(err)
	default:
		t.Skip(err)
	}
}

// Root is root on this machine: creating unix users, running agents as them,
// network namespaces.
var Root = Dependency{
	Name:  "root",
	Env:   "ZOOID_TEST_USERS",
	Get:   "run the tests as root; CI does",
	Probe: probeRoot,
}

func probeRoot() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("the tests run as uid %d", uid)
	}
	return nil
}

// DockerEngine is a Docker engine that answers the docker CLI.
var DockerEngine = Dependency{
	Name:  "a Docker engine",
	Env:   "ZOOID_TEST_DOCKER",
	Get:   "as root: docker/engine.sh start",
	Probe: probeDocker,
}

func probeDocker() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return errors.New("no docker CLI on PATH")
	}
	out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker info: %v: %s", err, firstLine(bytes.TrimSpace(out)))
	}
	return nil
}

// Chromium is Debian's chromium on PATH, which the report's browser test drives.
var Chromium = Dependency{
	Name:  "chromium",
	Env:   "ZOOID_TEST_CHROMIUM",
	Get:   "as root: apt-get install -y chromium (scripts/setup.sh does)",
	Probe: func() error { _, err := exec.LookPath("chromium"); return err },
}

// NodePackages is node on PATH and the npm packages installed under dir (a
// folder holding a package-lock.json), which scripts/setup.sh installs.
func NodePackages(dir string) Dependency {
	return Dependency{
		Name: "node and the npm packages of " + dir,
		Env:  "ZOOID_TEST_NODE",
		Get:  "install Node 20+ and npm, then run scripts/setup.sh",
		Probe: func() error {
			if _, err := exec.LookPath("node"); err != nil {
				return errors.New("no node on PATH")
			}
			if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
				return fmt.Errorf("no node_modules in %s", dir)
			}
			return nil
		},
	}
}

func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\n' {
			return string(b[:i])
		}
	}
	return string(b)
}

// Landlock is a Linux kernel with Landlock enabled (any ABI): the agents'
// default sandbox. Tests of what a newer ABI adds check the ABI themselves
// and hold the kernel to what it has.
var Landlock = Dependency{
	Name:  "a kernel with Landlock",
	Env:   "ZOOID_TEST_LANDLOCK",
	Get:   "Linux 5.13 or newer with landlock in its lsm= boot parameter (CONFIG_LSM)",
	Probe: probeLandlock,
}
