package config

import (
	"slices"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"
)

const roomsAgents = `agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#general', '#ops', '!existing:example.org'] }
`

// TestRoomSettings: rooms the daemon creates are private unless rooms: says public, and
// invite lists are read as user ids (short ones on the transport's server, others as they
// are).
func TestRoomSettings(t *testing.T) {
	c, err := Parse([]byte(okTransport+roomsAgents+`rooms:
  '#general':
    invite: ['@ori', '@mia:elsewhere.org']
  '#ops:example.org': { visibility: public }
  '!existing:example.org': { invite: ['@ori'] }
`), "zooid.yaml", testEnv)
	if err != nil {
		t.Fatalf("refused:\n%v", err)
	}
	if got := c.Room("#general:example.org"); got.Visibility != VisibilityPrivate ||
		!slices.Equal(got.Invite, []id.UserID{"@ori:example.org", "@mia:elsewhere.org"}) {
		t.Errorf("#general = %+v, want private with ori and mia invited", got)
	}
	if got := c.Room("#ops:example.org"); got.Visibility != VisibilityPublic || len(got.Invite) != 0 {
		t.Errorf("#ops = %+v, want public", got)
	}
	// A room rooms: does not name is private too.
	if got := c.Room("#elsewhere:example.org"); got.Visibility != VisibilityPrivate {
		t.Errorf("an unconfigured room = %+v, want private", got)
	}
	if got := c.Room("!existing:example.org"); !slices.Equal(got.Invite, []id.UserID{"@ori:example.org"}) {
		t.Errorf("!existing = %+v, want ori invited", got)
	}
}

func TestRoomRules(t *testing.T) {
	for _, tc := range []struct {
		name, rooms string
		want        []string
	}{
		{"unknown visibility", `rooms:
  '#general': { visibility: secret }
`, []string{`zooid.yaml:12: rooms.#general.visibility: must be "private" or "public", got "secret"`}},
		{"a room no agent is in", `rooms:
  '#typo': { visibility: public }
`, []string{`zooid.yaml:12: rooms.#typo: no agent is bound to #typo:example.org: list it in an agent's matrix.rooms, or remove it here`}},
		{"visibility of an existing room", `rooms:
  '!existing:example.org': { visibility: public }
`, []string{`zooid.yaml:12: rooms.!existing:example.org.visibility: !existing:example.org is a room id, a room that exists: the daemon creates only rooms named by an alias, and never changes an existing room's join rule`}},
		{"bad invitees", `rooms:
  '#general':
    invite: ['ori', '@a', '@ori', '@ori:example.org']
    moderators: ['@ori']
`, []string{
			`zooid.yaml:13: rooms.#general.invite[0]: must start with @, got "ori"`,
			`zooid.yaml:13: rooms.#general.invite[1]: @a:example.org is agent a, which joins its rooms by itself`,
			`zooid.yaml:13: rooms.#general.invite[3]: @ori:example.org is listed twice`,
			`zooid.yaml:14: rooms.#general: unknown key "moderators"`,
		}},
		{"the same room twice", `rooms:
  '#general': {}
  '#general:example.org': {}
`, []string{`zooid.yaml:13: rooms.#general:example.org: #general:example.org is configured twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(okTransport+roomsAgents+tc.rooms), "zooid.yaml", testEnv)
			if err == nil {
				t.Fatal("accepted")
			}
			got := strings.Split(err.Error(), "\n")
			if !slices.Equal(got, tc.want) {
				t.Fatalf("errors\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
