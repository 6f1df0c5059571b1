package container

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/zooid/config"
)

func TestIdentityNamesTheStateDir(t *testing.T) {
	a, b := Identity("/srv/zooid/.zooid"), Identity("/srv/other/.zooid")
	if a != Identity("/srv/zooid/.zooid") || a == b || len(a) != 24 {
		t.Fatalf("identities %q and %q: want a stable 24-hex-digit name per state dir", a, b)
	}
}

// TestPrepareMountsThreeThingsAndLabelsTheContainer pins the docker run line:
// the three mounts, the labels, no network by default, the daemon's uid, no
// capabilities, and the environment in a private file rather than argv.
func TestPrepareMountsThreeThingsAndLabelsTheContainer(t *testing.T) {
	dir := t.TempDir()
	d := &Docker{Daemon: "d1", EnvDir: filepath.Join(dir, "containers")}
	s, err := d.Prepare(Run{
		Agent:     "agent-a",
		Settings:  &config.Container{Image: "img:1", Workdir: "/work", Network: "none", Bridge: "/opt/zooid-static"},
		Command:   "/agent",
		Args:      []string{"--acp"},
		Env:       []string{"MODEL=fast", "API_KEY=not-in-argv-0123"},
		SocketDir: "/run/zooid/agent-a",
		WorkDir:   "/srv/agents/agent-a",
		UID:       os.Getuid(),
		GID:       os.Getgid(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Name, "zooid-d1-agent-a-") || s.Command != "docker" {
		t.Fatalf("container %q run by %q", s.Name, s.Command)
	}
	line := strings.Join(s.Args, " ")
	for _, want := range []string{
		"run -i --rm --name " + s.Name,
		"--label dev.zooid.daemon=d1 --label dev.zooid.agent=agent-a",
		"--network none",
		"--user " + strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid()),
		"--cap-drop ALL --security-opt no-new-privileges --log-driver none",
		"--mount type=bind,source=/run/zooid/agent-a,target=/zooid/run",
		"--mount type=bind,source=/opt/zooid-static,target=/zooid/bin/zooid,readonly",
		"--mount type=bind,source=/srv/agents/agent-a,target=/work",
		"--workdir /work",
		"img:1 /agent --acp",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("docker %s\nlacks %q", line, want)
		}
	}
	if n := strings.Count(line, "--mount"); n != 3 {
		t.Errorf("%d mounts, want 3: %s", n, line)
	}
	if strings.Contains(line, "not-in-argv") {
		t.Errorf("an environment value is in the docker command line: %s", line)
	}
	i := slices.Index(s.Args, "--env-file")
	if i < 0 {
		t.Fatalf("no --env-file: %s", line)
	}
	st, err := os.Stat(s.Args[i+1])
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("env file mode %v, want 0600", st.Mode().Perm())
	}
	if data, _ := os.ReadFile(s.Args[i+1]); string(data) != "MODEL=fast\nAPI_KEY=not-in-argv-0123\n" {
		t.Errorf("env file holds %q", data)
	}
}

// TestPrepareMountsAPiAgentsPiDirectory: the fourth mount, for the pi preset
// only, where the daemon installed the Zooid extension.
func TestPrepareMountsAPiAgentsPiDirectory(t *testing.T) {
	d := &Docker{Daemon: "d1", EnvDir: filepath.Join(t.TempDir(), "containers")}
	run := Run{
		Agent:     "pia",
		Settings:  &config.Container{Image: "img:1", Workdir: "/work", Network: "none", Bridge: "/opt/zooid-static"},
		Command:   "pi-acp",
		SocketDir: "/run/zooid/pia",
		WorkDir:   "/srv/agents/pia",
		PiDir:     "/srv/pi/pia",
	}
	s, err := d.Prepare(run)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(s.Args, " ")
	if !strings.Contains(line, "--mount type=bind,source=/srv/pi/pia,target=/zooid/pi ") {
		t.Errorf("docker %s\nlacks the pi directory's mount", line)
	}
	if n := strings.Count(line, "--mount"); n != 4 {
		t.Errorf("%d mounts, want 4: %s", n, line)
	}
	run.PiDir = "pi/pia"
	if _, err := d.Prepare(run); err == nil || !strings.Contains(err.Error(), `the pi directory "pi/pia" must be an absolute path`) {
		t.Errorf("a relative pi directory: err %v, want a refusal", err)
	}
}

func TestPrepareRefusesWhatDockerWouldMisread(t *testing.T) {
	d := &Docker{Daemon: "d1", EnvDir: t.TempDir()}
	ok := &config.Container{Image: "img:1", Workdir: "/work", Network: "none", Bridge: "/opt/zooid"}
	for name, r := range map[string]Run{
		"comma in a mount source": {Agent: "a", Settings: ok, Command: "/a", SocketDir: "/run/a,b", WorkDir: "/w"},
		"relative work dir":       {Agent: "a", Settings: ok, Command: "/a", SocketDir: "/run/a", WorkDir: "w"},
		"multi-line variable":     {Agent: "a", Settings: ok, Command: "/a", SocketDir: "/run/a", WorkDir: "/w", Env: []string{"X=1\nY=2"}},
		"no image":                {Agent: "a", Settings: &config.Container{Bridge: "/opt/zooid"}, Command: "/a", SocketDir: "/run/a", WorkDir: "/w"},
	} {
		if _, err := d.Prepare(r); err == nil {
			t.Errorf("%s: prepared, want an error", name)
		}
	}
}
