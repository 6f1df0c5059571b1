package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/testdeps"

	"github.com/zooid-dev/zooid/modeldouble"
	"github.com/zooid-dev/zooid/zooid/piext"
	"github.com/zooid-dev/zooid/zooid/unixuser"
)

// piPackage is the pinned pi, pi-acp and Node (scripts/setup.sh installs them).
const piPackage = "zooid/piext/testdata/pi"

// addUserWithHome is addUser with a home directory made under base: pi-acp
// keeps its session map in ~/.pi/pi-acp.
func addUserWithHome(t *testing.T, prefix, base string) unixuser.User {
	t.Helper()
	u := addUser(t, prefix)
	home := filepath.Join(base, "home-"+u.Name)
	must(t, os.Mkdir(home, 0o700))
	must(t, os.Chown(home, int(u.UID), int(u.GID)))
	if out, err := exec.Command("usermod", "--home", home, u.Name).CombinedOutput(); err != nil {
		t.Fatalf("usermod --home %s %s: %v: %s", home, u.Name, err, out)
	}
	u, err := unixuser.Resolve(u.Name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestPiAgentRunsAsItsOwnUser: an agent on the pi preset with a user: of its
// own. The daemon makes its default pi directory under the state dir that
// user's, installs the extension as that user's file, and the real pi,
// running as that user, calls a Zooid tool through it and answers with the
// result; its model is a model double on loopback.
func TestPiAgentRunsAsItsOwnUser(t *testing.T) {
	requireUserTests(t)
	testdeps.Require(t, testdeps.NodePackages(filepath.Join(repoRoot, piPackage)))
	w := newUsersWorld(t)
	u := addUserWithHome(t, "ztp", w.base)

	pkg, err := filepath.Abs(filepath.Join(repoRoot, piPackage))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(pkg, "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(bin, "pi-acp")); err != nil {
		t.Fatalf("pi-acp is not installed (run scripts/setup.sh, which runs npm ci in %s): %v", piPackage, err)
	}
	if ok, err := unixuser.CanExec(u, filepath.Join(pkg, "node_modules", "node", "bin", "node")); err != nil || !ok {
		t.Fatalf("%s can't run the pinned Node in %s (its parents must be searchable for other users): %v", u, pkg, err)
	}

	md, err := modeldouble.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { md.Close() })
	md.Script("pia").Call("zooid_get_room_info", "").Say("this room: {result}")

	// The operator configures pi for the agent in its pi directory, as the
	// agent's user: the double is its model provider.
	piDir := filepath.Join(w.state, "pi", "pia")
	must(t, os.MkdirAll(piDir, 0o700))
	must(t, os.Chmod(w.state, 0o711))
	for name, s := range map[string]string{
		"models.json": `{"providers": {"modeldouble": {"baseUrl": "` + md.BaseURL("pia", modeldouble.Anthropic) + `",` +
			` "api": "anthropic-messages", "apiKey": "modeldouble", "models": [{"id": "double-1"}]}}}`,
		"settings.json": `{"defaultProvider": "modeldouble", "defaultModel": "double-1", "quietStartup": true}`,
	} {
		p := filepath.Join(piDir, name)
		writeFile(t, p, s)
		must(t, os.Chown(p, int(u.UID), int(u.GID)))
	}

	push, pushFile := boundPort(t)
	writeFile(t, w.cfg, matrixYAML(push)+fmt.Sprintf(`run_dir: %s
agents:
  pia:
    user: %s
    acp:
      preset: pi
      env: { PATH: %q, PI_OFFLINE: "1", npm_config_offline: "true" }
    matrix:
      user_id: '@pia'
      rooms: ['#general']
`, w.run, u.Name, bin+":/usr/bin:/bin"))
	e2eEnv(t)
	if code, out := w.runAs(t, nil, nil, "check", "--config", w.cfg); code != 0 {
		t.Fatalf("zooid check refused the config (exit %d):\n%s", code, out)
	}
	s := startStack(t, w.exe, w.cfg, pushFile, "--log-level", "debug")
	s.mention("pia", "p1", "what room is this?")

	var reply string
	poll(t, 90*time.Second, 100*time.Millisecond, "pia's reply", func() bool {
		for _, ev := range s.recent() {
			content, _ := ev["content"].(map[string]any)
			if body, _ := content["body"].(string); ev["sender"] == "@pia:localhost" && strings.HasPrefix(body, "this room: ") {
				reply = body
				return true
			}
		}
		return false
	})
	if !strings.Contains(reply, `"transport":"matrix"`) || !strings.Contains(reply, s.room) {
		t.Errorf("pia's reply %q, want zooid_get_room_info's result for %s", reply, s.room)
	}

	// What pi and pi-acp wrote, they wrote as the agent's user; the daemon
	// handed it the directory and the extension.
	for _, p := range []string{piDir, filepath.Join(piDir, "extensions", piext.FileName), filepath.Join(piDir, "sessions"), filepath.Join(w.base, "home-"+u.Name, ".pi", "pi-acp")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if sys := st.Sys().(*syscall.Stat_t); sys.Uid != u.UID {
			t.Errorf("%s is owned by uid %d, want %s", p, sys.Uid, u)
		}
	}
	if st, err := os.Stat(piDir); err == nil && st.Mode().Perm() != 0o700 {
		t.Errorf("pia's pi directory has mode %v, want 0700", st.Mode().Perm())
	}
	if misses := md.Script("pia").Misses(); len(misses) > 0 {
		t.Errorf("the model double's script: %v", misses)
	}
}
