package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/zooid/config"
)

func TestNewRefusesTwoMatrixTransports(t *testing.T) {
	cfg := &config.Config{Transports: []config.Transport{
		{Name: "matrix", Type: "matrix", Matrix: &config.MatrixTransport{}},
		{Name: "other", Type: "matrix", Matrix: &config.MatrixTransport{}},
	}}
	_, err := New(Options{Config: cfg})
	if err == nil || !strings.Contains(err.Error(), "matrix, other") {
		t.Fatalf("err = %v, want a refusal naming both transports", err)
	}
}

func TestTurnTimeoutComesFromOptionsThenConfigThenDefault(t *testing.T) {
	for _, c := range []struct {
		opt, cfg, want time.Duration
	}{
		{0, 0, DefaultTurnTimeout},
		{0, 5 * time.Minute, 5 * time.Minute},
		{time.Second, 5 * time.Minute, time.Second},
	} {
		d, err := New(Options{Config: &config.Config{TurnTimeout: c.cfg}, TurnTimeout: c.opt})
		if err != nil {
			t.Fatal(err)
		}
		if d.opts.TurnTimeout != c.want {
			t.Errorf("options %s, config %s: turn timeout %s, want %s", c.opt, c.cfg, d.opts.TurnTimeout, c.want)
		}
	}
}

func TestNewRefusesATokenOnAnAgentsCommandLine(t *testing.T) {
	cfg := &config.Config{
		Transports: []config.Transport{{Name: "matrix", Type: "matrix", Matrix: &config.MatrixTransport{ASToken: "as-secret-token", HSToken: "hs"}}},
		Agents:     []config.Agent{{Name: "leaky", ACP: config.ACP{Command: "/bin/agent", Args: []string{"--token=as-secret-token"}}}},
	}
	if _, err := New(Options{Config: cfg}); err == nil || !strings.Contains(err.Error(), "leaky") {
		t.Fatalf("err = %v, want a refusal naming the agent", err)
	}
}

func TestCursorKeySurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	first, err := cursorKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := cursorKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 32 || string(first) != string(second) {
		t.Fatalf("cursor key changed across restarts: %x then %x", first, second)
	}
}
