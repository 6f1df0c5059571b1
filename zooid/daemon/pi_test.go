package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/piext"
)

func TestPiAgentsGetTheExtensionInTheirOwnPiDir(t *testing.T) {
	state := t.TempDir()
	d := &Daemon{opts: Options{Config: &config.Config{StateDir: state}}, log: slog.New(slog.DiscardHandler)}

	pi := config.Agent{Name: "pia", ACP: config.ACP{Preset: "pi"}}
	if !usesPi(pi) || usesPi(config.Agent{ACP: config.ACP{Preset: "claude"}}) || usesPi(config.Agent{ACP: config.ACP{Preset: "pi", Command: "my-pi"}}) {
		t.Fatal("usesPi: want true exactly for the pi preset without a command override")
	}
	dir, err := d.installPi(pi)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(state, "pi", "pia"); dir != want {
		t.Fatalf("pi dir %s, want %s (its own, never ~/.pi/agent)", dir, want)
	}
	src, _ := piext.Source()
	if got, err := os.ReadFile(filepath.Join(dir, "extensions", piext.FileName)); err != nil || string(got) != string(src) {
		t.Fatalf("extension not installed: %v", err)
	}
	env := piEnv(&agentRuntime{piDir: dir, socket: "/run/x/pia.sock"})
	if !slices.Equal(env, []string{"PI_CODING_AGENT_DIR=" + dir, "ZOOID_SOCKET=/run/x/pia.sock"}) {
		t.Fatalf("pi env %v", env)
	}
	if env := piEnv(&agentRuntime{socket: "/run/x/a.sock"}); env != nil {
		t.Fatalf("a non-pi agent gets %v, want nothing", env)
	}

	own := filepath.Join(t.TempDir(), "mine")
	pi.ACP.Env = map[string]string{piext.AgentDirEnv: own}
	if dir, err := d.installPi(pi); err != nil || dir != own {
		t.Fatalf("configured PI_CODING_AGENT_DIR: dir %s, err %v; want %s", dir, err, own)
	}
}

// TestContainerPiEnv: a pi agent's container names its pi directory and
// socket by their mount points, never by the host paths acp.env may give,
// and gets HOME there unless the operator set one.
func TestContainerPiEnv(t *testing.T) {
	base := []string{"PI_CODING_AGENT_DIR=/srv/host/pi-a", "MODEL=fast", "ZOOID_SOCKET=/run/host.sock"}
	got := containerPiEnv(slices.Clone(base), true)
	want := []string{"MODEL=fast", "PI_CODING_AGENT_DIR=/zooid/pi", "ZOOID_SOCKET=/zooid/run/zooid.sock", "HOME=/zooid/pi"}
	if !slices.Equal(got, want) {
		t.Errorf("pi container env %v, want %v", got, want)
	}
	got = containerPiEnv([]string{"HOME=/home/pi"}, true)
	if want := []string{"HOME=/home/pi", "PI_CODING_AGENT_DIR=/zooid/pi", "ZOOID_SOCKET=/zooid/run/zooid.sock"}; !slices.Equal(got, want) {
		t.Errorf("with the operator's HOME: %v, want %v", got, want)
	}
	if got := containerPiEnv(slices.Clone(base), false); !slices.Equal(got, base) {
		t.Errorf("another agent's container env %v, want it unchanged", got)
	}
}
