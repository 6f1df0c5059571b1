package daemon

import (
	"testing"
	"time"

	"github.com/zooid-dev/zooid/zooid/config"
)

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
