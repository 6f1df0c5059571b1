package sandbox_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/zooid/sandbox"
)

// tree makes files (and, for names ending in "/", directories) under a
// fresh directory and returns it, after symlinks.
func tree(t *testing.T, paths ...string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o700); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestPlanCarvesTheDaemonsFilesOutOfEveryGrant: a system root holding
// zooid.yaml is granted entry by entry around it (a backup beside it, the
// other files); a symlink there into the state dir is not followed; the
// agent's own directory inside the state dir is kept, another agent's
// directory is not, and an own grant holding another agent's directory is
// split around it.
func TestPlanCarvesTheDaemonsFilesOutOfEveryGrant(t *testing.T) {
	root := tree(t,
		"etc/hosts", "etc/zooid/zooid.yaml", "etc/zooid/zooid.yaml.bak", "etc/ssl/cert.pem",
		"state/cursor.key", "state/agents/a/", "state/agents/b/", "state/tmp/a/",
		"home/.gitconfig", "home/project/b/", "home/project/README",
		"tools/node_modules/.bin/", "tools/node_modules/dep/index.js", "tools/lib/pkg/index.js", "usr/bin/")
	if err := os.Symlink(filepath.Join(root, "state"), filepath.Join(root, "etc", "state-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "tools/lib/pkg/index.js"), filepath.Join(root, "tools/node_modules/.bin/tool")); err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(root, p) }
	p, notes := sandbox.Plan(sandbox.Request{
		System:  []string{at("etc"), at("usr"), at("missing")},
		Devices: []string{},
		Write:   []string{at("state/agents/a"), at("state/tmp/a"), at("home")},
		Read:    []string{at("state/agents/b")},
		Bins:    []string{at("tools/node_modules/.bin"), "relative/bin", "/bin"},
		Command: at("tools/node_modules/.bin/tool"),
		Socket:  at("state/agents/a"),
		Protect: []string{at("etc/zooid/zooid.yaml"), at("state"), at("state/agents/b"), at("home/project/b")},
		Connect: sandbox.Ports{443},
	})
	if slices.Contains(p.Read, "/") {
		t.Errorf("read %q: / itself, the parent of /bin", p.Read)
	}
	inTree := slices.DeleteFunc(slices.Clone(p.Read), func(r string) bool { return !strings.HasPrefix(r, root+"/") })
	wantRead := []string{
		at("etc/hosts"), at("etc/ssl"), at("etc/zooid/zooid.yaml.bak"),
		at("tools/lib/pkg"), at("tools/node_modules"), at("usr"),
	}
	if !slices.Equal(inTree, wantRead) {
		t.Errorf("read:\n got %q\nwant %q", inTree, wantRead)
	}
	wantWrite := []string{at("home/.gitconfig"), at("home/project/README"), at("state/agents/a"), at("state/tmp/a")}
	if !slices.Equal(p.Write, wantWrite) {
		t.Errorf("write:\n got %q\nwant %q", p.Write, wantWrite)
	}
	if want := []string{at("state/agents/a")}; !slices.Equal(p.Sockets, want) {
		t.Errorf("sockets: got %q, want %q", p.Sockets, want)
	}
	if !slices.Equal(p.Connect, sandbox.Ports{443}) || p.Bind != nil {
		t.Errorf("ports: connect %v bind %v, want [443] and nil (unrestricted)", p.Connect, p.Bind)
	}
	for _, dir := range []string{at("etc"), at("etc/zooid"), at("home"), at("home/project")} {
		if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, dir+" holds the daemon's files") }) {
			t.Errorf("no note says %s was split: %q", dir, notes)
		}
	}
	for i, n := range notes {
		if slices.Contains(notes[:i], n) {
			t.Errorf("note %q given twice: %q", n, notes)
		}
	}
}

// TestPlanGrantsNothingThatIsProtected: a grant that is a protected path,
// or (not being the agent's own) lies in one, is dropped whole.
func TestPlanGrantsNothingThatIsProtected(t *testing.T) {
	root := tree(t, "state/cursor.key", "state/matrix/matrix.db", "conf/zooid.yaml")
	at := func(p string) string { return filepath.Join(root, p) }
	p, _ := sandbox.Plan(sandbox.Request{
		System:  []string{},
		Devices: []string{},
		Write:   []string{at("state")},
		Read:    []string{at("state/matrix"), at("conf/zooid.yaml"), at("conf")},
		Protect: []string{at("state"), at("conf/zooid.yaml")},
	})
	if len(p.Write) != 0 || len(p.Read) != 0 {
		t.Errorf("granted read %q, write %q; want nothing", p.Read, p.Write)
	}
}
