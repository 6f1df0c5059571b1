package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mode(t *testing.T, dir string) os.FileMode {
	t.Helper()
	st, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode()
}

func TestPrepareRefusesADirectoryOthersCanSteer(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "mine")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "planted")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	groupw := filepath.Join(base, "groupw")
	if err := os.Mkdir(groupw, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(groupw, 0o770); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, dir, want string }{
		{"planted symlink", link, "run dir " + link + " is a symlink, which the daemon does not follow: remove it, or set run_dir to a private directory of your own"},
		{"world-writable sticky dir", shared, "run dir " + shared + " is writable by group or others (mode 1777): chmod 700 it if it is yours alone, or set run_dir to a private directory of your own"},
		{"group-writable dir", groupw, "(mode 0770)"},
		{"a file", file, "is not a directory"},
	}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(base, "foreign")
		if err := os.Mkdir(foreign, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, dir, want string }{"foreign-owned dir", foreign,
			"run dir " + foreign + " is owned by uid 4242, not by this user (uid 0): remove it, or set run_dir to a private directory of your own"})
	} else {
		t.Log("not root: the foreign-owned case needs chown and runs in CI, which is root")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := mode(t, c.dir)
			_, _, err := Prepare(c.dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Prepare(%s) err = %v, want %q", c.dir, err, c.want)
			}
			if cerr := Check(c.dir); cerr == nil || cerr.Error() != err.Error() {
				t.Fatalf("Check says %v, Prepare says %v; want the same refusal", cerr, err)
			}
			if after := mode(t, c.dir); after != before {
				t.Fatalf("mode changed from %v to %v: a refused dir must be left alone", before, after)
			}
		})
	}
	if got := mode(t, target); got.Perm() != 0o700 {
		t.Fatalf("the symlink's target changed mode: %v", got)
	}
}

func TestPrepareCreatesAPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "run")
	got, made, err := Prepare(dir)
	if err != nil || got != dir || made {
		t.Fatalf("Prepare = %q, %v, %v", got, made, err)
	}
	if m := mode(t, dir); !m.IsDir() || m.Perm() != 0o700 {
		t.Fatalf("mode %v, want drwx------", m)
	}
	// An existing private dir is used as it is: 0750 is not widened or narrowed.
	own := filepath.Join(t.TempDir(), "own")
	if err := os.Mkdir(own, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(own, 0o750); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Prepare(own); err != nil {
		t.Fatalf("own 0750 dir refused: %v", err)
	}
	if m := mode(t, own); m.Perm() != 0o750 {
		t.Fatalf("own dir chmod'ed to %v", m)
	}
}

func TestPrepareWithoutADirectoryMakesAFreshOne(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	a, madeA, err := Prepare("")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(a)
	b, madeB, err := Prepare("")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(b)
	if !madeA || !madeB || a == b {
		t.Fatalf("Prepare(\"\") gave %s (%v) and %s (%v): want two fresh directories", a, madeA, b, madeB)
	}
	if m := mode(t, a); m.Perm() != 0o700 {
		t.Fatalf("fresh dir mode %v, want 0700", m)
	}
}

// TestPrepareSearchableMakesWhatItCreates0711: for agents with users of their
// own, a run dir the daemon creates (named or fresh) is 0711; an existing one
// keeps its mode.
func TestPrepareSearchableMakesWhatItCreates0711(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if _, _, err := PrepareSearchable(dir); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, dir); m.Perm() != 0o711 {
		t.Fatalf("created run dir mode %v, want 0711", m)
	}
	t.Setenv("TMPDIR", t.TempDir())
	fresh, made, err := PrepareSearchable("")
	if err != nil || !made {
		t.Fatalf("PrepareSearchable(\"\") = %q, %v, %v", fresh, made, err)
	}
	defer os.Remove(fresh)
	if m := mode(t, fresh); m.Perm() != 0o711 {
		t.Fatalf("fresh run dir mode %v, want 0711", m)
	}
	own := filepath.Join(t.TempDir(), "own")
	if err := os.Mkdir(own, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := PrepareSearchable(own); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, own); m.Perm() != 0o700 {
		t.Fatalf("an existing run dir was chmod'ed to %v", m)
	}
}
