package config

import (
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"
)

// An agent's default user id carries its daemon's workstation, so two
// daemons' agents of one name are two users on one homeserver; without a
// workstation it is @name, and a user_id written out is kept as written.
func TestWorkstationNamesDefaultUserIDs(t *testing.T) {
	for _, tc := range []struct {
		name, top, agentMatrix string
		wantWS                 string
		want                   id.UserID
	}{
		{"no workstation", "", `{ rooms: ['#r'] }`, "", "@architect:example.org"},
		{"workstation", "workstation: laptop\n", `{ rooms: ['#r'] }`, "laptop", "@laptop.architect:example.org"},
		{"user_id given", "workstation: laptop\n", `{ user_id: '@arch', rooms: ['#r'] }`, "laptop", "@arch:example.org"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(okTransport+tc.top+"agents:\n  architect:\n    acp: { preset: pi }\n    matrix: "+tc.agentMatrix+"\n"), "zooid.yaml", testEnv)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Workstation != tc.wantWS {
				t.Errorf("workstation %q, want %q", cfg.Workstation, tc.wantWS)
			}
			if got := cfg.Agents[0].Matrix.UserID; got != tc.want {
				t.Errorf("user id %s, want %s", got, tc.want)
			}
		})
	}
}

func TestWorkstationRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"bad workstation name", okTransport + "workstation: Laptop.1\nagents:\n  a:\n    acp: { preset: pi }\n    matrix: { rooms: ['#r'] }\n",
			`zooid.yaml:7: workstation: must match ^[a-z][a-z0-9-]{0,31}$, got "Laptop.1"`},
		{"default needs a server name", "transports:\n  matrix:\n    homeserver: http://127.0.0.1:8008\n    as_token: ${AS}\n    hs_token: ${HS}\nworkstation: ci\nagents:\n  a:\n    acp: { preset: pi }\n    matrix: { rooms: ['!r:example.org'] }\n",
			`zooid.yaml:10: agents.a.matrix.user_id: the default user id "@ci.a" has no server part and the transport has no server_name; set server_name on the transport, or user_id here`},
		{"default collides with a written one", okTransport + "workstation: ci\nagents:\n  a:\n    acp: { preset: pi }\n    matrix: { rooms: ['#r'] }\n  b:\n    acp: { preset: pi }\n    matrix: { user_id: '@ci.a', rooms: ['#r'] }\n",
			`zooid.yaml:14: agents.b.matrix.user_id: @ci.a:example.org is already used by agent a`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "zooid.yaml", testEnv)
			if err == nil || strings.TrimSpace(err.Error()) != tc.want {
				t.Fatalf("error:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}

func TestSplitAddress(t *testing.T) {
	for addr, want := range map[string][2]string{
		"architect":        {"", "architect"},
		"laptop.architect": {"laptop", "architect"},
	} {
		if ws, n := SplitAddress(addr); ws != want[0] || n != want[1] {
			t.Errorf("SplitAddress(%q) = %q, %q; want %q, %q", addr, ws, n, want[0], want[1])
		}
	}
}
