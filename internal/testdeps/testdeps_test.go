package testdeps

import (
	"errors"
	"strings"
	"testing"
)

func TestTheRule(t *testing.T) {
	there := Dependency{Name: "a widget", Env: "ZOOID_TEST_WIDGET", Get: "buy one", Probe: func() error { return nil }}
	gone := there
	gone.Probe = func() error { return errors.New("no widget on PATH") }
	cases := []struct {
		name, ci, env string
		dep           Dependency
		wantErr       string // "" for none
		wantFail      bool
	}{
		{"present, not asked", "", "", there, "", false},
		{"present, asked", "true", "1", there, "", false},
		{"missing, not asked: left out with the way to get it", "", "", gone,
			"left out: needs a widget, which is missing here: no widget on PATH (buy one; ZOOID_TEST_WIDGET=1 or CI=true makes this a failure)", false},
		{"missing, variable says 0: left out", "", "0", gone, "left out: needs a widget", false},
		{"missing under CI=true: fails", "true", "", gone,
			"CI=true asks for a widget, which is missing: no widget on PATH (buy one)", true},
		{"missing under CI=true with the variable at 0: CI wins", "true", "0", gone, "CI=true asks for a widget", true},
		{"missing, asked by its variable: fails", "", "1", gone,
			"ZOOID_TEST_WIDGET=1 asks for a widget, which is missing: no widget on PATH (buy one)", true},
		{"CI=false is not CI", "false", "", gone, "left out: needs a widget", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("CI", c.ci)
			t.Setenv("ZOOID_TEST_WIDGET", c.env)
			err, fail := c.dep.Missing()
			if c.wantErr == "" {
				if err != nil || fail {
					t.Fatalf("Missing() = %v, %v; want nil, false", err, fail)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.wantErr) || fail != c.wantFail {
				t.Fatalf("Missing() = %v, %v; want an error starting %q, fail %v", err, fail, c.wantErr, c.wantFail)
			}
		})
	}
}

// TestRequireSkipsOrFails drives Require through a testing.TB that records
// what it was told, since a real skip or failure would end this test.
func TestRequireSkipsOrFails(t *testing.T) {
	gone := Dependency{Name: "a widget", Env: "ZOOID_TEST_WIDGET", Get: "buy one", Probe: func() error { return errors.New("none") }}
	t.Setenv("ZOOID_TEST_WIDGET", "")
	t.Setenv("CI", "")
	r := &recorder{TB: t}
	run(func() { Require(r, gone) })
	if r.did != "skip" {
		t.Fatalf("not asked: Require did %q, want skip", r.did)
	}
	t.Setenv("CI", "true")
	r = &recorder{TB: t}
	run(func() { Require(r, gone) })
	if r.did != "fatal" {
		t.Fatalf("under CI=true: Require did %q, want fatal", r.did)
	}
}

type recorder struct {
	testing.TB
	did string
}

type stop struct{}

func (r *recorder) Helper()           {}
func (r *recorder) Skip(args ...any)  { r.did = "skip"; panic(stop{}) }
func (r *recorder) Fatal(args ...any) { r.did = "fatal"; panic(stop{}) }

func run(f func()) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(stop); !ok {
				panic(v)
			}
		}
	}()
	f()
}
