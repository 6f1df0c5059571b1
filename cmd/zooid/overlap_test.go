package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// zooid check (and zooid run) refuse a config whose appservice namespace
// overlaps another registration the operator names with --other-registration:
// the error names both sides. Two workstations' daemons, whose agents'
// default users carry their workstation, pass side by side.
func TestCheckRefusesOverlappingNamespaces(t *testing.T) {
	dir := t.TempDir()
	daemon := func(ws, id, as string) string {
		return `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: ` + as + `
    hs_token: hs-` + as + `
    id: ` + id + `
    sender_localpart: ` + id + `
    listen: 127.0.0.1:9000
` + ws + `agents:
  architect:
    acp: { command: /bin/true }
    matrix: { rooms: ['#shared'] }
`
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		return p
	}
	registration := func(cfg string) string {
		var reg strings.Builder
		if code := dispatch([]string{"registration", "--config", cfg}, &reg, io.Discard); code != 0 {
			t.Fatalf("zooid registration %s: exit %d", cfg, code)
		}
		return reg.String()
	}
	laptop := write("laptop.yaml", daemon("workstation: laptop\n", "laptop", "as-laptop-0123456789"))
	laptopReg := write("laptop-registration.yaml", registration(laptop))
	ci := write("ci.yaml", daemon("workstation: ci\n", "ci", "as-ci-0123456789abc"))

	var out, errb strings.Builder
	if code := dispatch([]string{"check", "--config", ci, "--other-registration", laptopReg}, &out, &errb); code != 0 {
		t.Fatalf("two workstations apart: exit %d: %s", code, errb.String())
	}

	// A daemon without a workstation has an architect too: @architect is its own,
	// but a laptop registration written to claim every @laptop.* (as a hand-made
	// one may) overlaps a daemon whose agent is @laptop.architect.
	broad := write("broad-registration.yaml", strings.Replace(registration(laptop), `^@laptop\.architect:example\.org$`, `'@laptop\..*'`, 1))
	clash := write("clash.yaml", strings.Replace(daemon("workstation: laptop\n", "clash", "as-clash-0123456789"), "listen: 127.0.0.1:9000", "listen: 127.0.0.1:9001", 1))
	for _, cmd := range []string{"check", "run"} {
		out.Reset()
		errb.Reset()
		if code := dispatch([]string{cmd, "--config", clash, "--other-registration", broad}, &out, &errb); code != 1 {
			t.Fatalf("zooid %s with an overlap: exit %d, want 1: %s", cmd, code, errb.String())
		}
		want := `agent architect's user (agents.architect.matrix.user_id) @laptop.architect:example.org is in the user namespace "@laptop\\..*" of the registration "laptop" (` + broad + `)`
		if !strings.Contains(errb.String(), want) || !strings.Contains(errb.String(), clash) {
			t.Errorf("zooid %s's error lacks %q and the config's path:\n%s", cmd, want, errb.String())
		}
	}

	// The same appservice id and as_token: the homeserver can't tell the two apart.
	same := write("same.yaml", strings.Replace(daemon("workstation: ci\n", "laptop", "as-laptop-0123456789"), "listen: 127.0.0.1:9000", "listen: 127.0.0.1:9002", 1))
	errb.Reset()
	if code := dispatch([]string{"check", "--config", same, "--other-registration", laptopReg}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), `the registration "laptop" (`+laptopReg+`) has this daemon's appservice id "laptop"`) ||
		!strings.Contains(errb.String(), "has this daemon's as_token") ||
		!strings.Contains(errb.String(), "the appservice sender (transports.matrix.sender_localpart) @laptop:example.org is the sender of") {
		t.Errorf("same id and token: exit %d:\n%s", code, errb.String())
	}
	if strings.Contains(errb.String(), "as-laptop-0123456789") {
		t.Errorf("a token was printed:\n%s", errb.String())
	}
}
