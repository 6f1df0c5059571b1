package conformance

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"
)

func (s *suite) testAccount(t *testing.T) {
	t.Parallel()

	t.Run("RegisterDummyStartsWithUIA401", func(t *testing.T) {
		t.Parallel()
		lp := s.localpart("uia")
		c := s.unauthed()
		res := c.Do(t, "POST", CS("v3", "register"), map[string]any{"username": lp, "password": "pw-" + lp})
		MustStatus(t, res, http.StatusUnauthorized, "")
		body := res.JSON()
		MatchJSON(t, "UIA first step", body, KeyNonEmptyString("session"), KeyPresent("flows"))
		dummyOnly := false
		for _, f := range body.Get("flows").Array() {
			stages := f.Get("stages").Array()
			if len(stages) == 1 && stages[0].String() == "m.login.dummy" {
				dummyOnly = true
			}
		}
		if !dummyOnly {
			t.Fatalf("no flow with the single stage m.login.dummy: %s", res)
		}
		reg := c.MustDo(t, "POST", CS("v3", "register"), map[string]any{
			"username": lp, "password": "pw-" + lp,
			"auth": map[string]any{"type": "m.login.dummy", "session": body.Get("session").String()},
		})
		MatchJSON(t, "register", reg, KeyEqual("user_id", string(s.userID(lp))), KeyNonEmptyString("access_token"), KeyNonEmptyString("device_id"))
	})

	t.Run("RegisterTakenUsernameIsUserInUse", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "taken")
		res := s.registerUIA(t, map[string]any{"username": alice.UserID.Localpart(), "password": "other"})
		MustStatus(t, res, http.StatusBadRequest, "M_USER_IN_USE")
	})

	t.Run("RegisterAvailable", func(t *testing.T) {
		t.Parallel()
		res := s.unauthed().MustDo(t, "GET", CS("v3", "register", "available"), nil, WithQuery("username", s.localpart("free")))
		MatchJSON(t, "available", res, KeyEqual("available", true))
		alice := s.registerUser(t, "notavail")
		ExpectStatus(t, s.unauthed().Do(t, "GET", CS("v3", "register", "available"), nil, WithQuery("username", alice.UserID.Localpart())),
			http.StatusBadRequest, "M_USER_IN_USE")
		// A user's access token on /register (without the appservice type) is refused outright.
		res2 := alice.Do(t, "POST", CS("v3", "register"), map[string]any{"username": s.localpart("withtoken"), "password": "pw"})
		ExpectStatus(t, res2, http.StatusBadRequest, "M_UNKNOWN")
	})

	t.Run("LoginPasswordThenWhoami", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "login")
		flows := s.unauthed().MustDo(t, "GET", CS("v3", "login"), nil)
		var types []string
		for _, f := range flows.Get("flows.#.type").Array() {
			types = append(types, f.String())
		}
		if !slices.Contains(types, "m.login.password") {
			t.Fatalf("GET /login flows %q lack m.login.password", types)
		}
		login := s.unauthed().MustDo(t, "POST", CS("v3", "login"), map[string]any{
			"type":       "m.login.password",
			"identifier": map[string]any{"type": "m.id.user", "user": alice.UserID.Localpart()},
			"password":   "pw-" + alice.UserID.Localpart(),
		})
		MatchJSON(t, "login", login, KeyEqual("user_id", string(alice.UserID)), KeyNonEmptyString("access_token"), KeyNonEmptyString("device_id"))
		if login.Get("access_token").String() == alice.AccessToken {
			t.Fatalf("login returned the registration token again; want a new device token")
		}
		second := &Client{BaseURL: s.target.BaseURL, AccessToken: login.Get("access_token").String(), http: s.http}
		who := second.MustDo(t, "GET", CS("v3", "account", "whoami"), nil)
		MatchJSON(t, "whoami", who, KeyEqual("user_id", string(alice.UserID)), KeyEqual("device_id", login.Get("device_id").String()))

		// The daemon's impersonating clients are mautrix clients; whoami must parse there too.
		resp, err := alice.Mautrix(t).Whoami(context.Background())
		if err != nil {
			t.Fatalf("mautrix whoami: %v", err)
		}
		if resp.UserID != alice.UserID || resp.DeviceID != alice.DeviceID {
			t.Fatalf("mautrix whoami = %s/%s, want %s/%s", resp.UserID, resp.DeviceID, alice.UserID, alice.DeviceID)
		}
	})

	t.Run("LoginWrongPasswordIsForbidden", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "badpw")
		res := s.unauthed().Do(t, "POST", CS("v3", "login"), map[string]any{
			"type":       "m.login.password",
			"identifier": map[string]any{"type": "m.id.user", "user": alice.UserID.Localpart()},
			"password":   "wrong",
		})
		MustStatus(t, res, http.StatusForbidden, "M_FORBIDDEN")
	})

	t.Run("DisplayName", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "dn")
		bob := s.registerUser(t, "dnreader")
		// Synapse gives every new account its localpart as display name.
		initial := bob.MustDo(t, "GET", CS("v3", "profile", string(alice.UserID), "displayname"), nil)
		MatchJSON(t, "default displayname", initial, KeyEqual("displayname", alice.UserID.Localpart()))
		name := "Alice " + s.runID
		alice.MustDo(t, "PUT", CS("v3", "profile", string(alice.UserID), "displayname"), map[string]any{"displayname": name})
		got := bob.MustDo(t, "GET", CS("v3", "profile", string(alice.UserID), "displayname"), nil)
		MatchJSON(t, "displayname", got, KeyEqual("displayname", name))
		viaMautrix, err := bob.Mautrix(t).GetDisplayName(context.Background(), alice.UserID)
		if err != nil || viaMautrix.DisplayName != name {
			t.Fatalf("mautrix GetDisplayName = %+v, %v; want %q", viaMautrix, err, name)
		}
		// A room joined after the change shows the name in its member list.
		room := s.publicRoomWith(t, bob, alice)
		members := bob.MustDo(t, "GET", CS("v3", "rooms", string(room), "joined_members"), nil)
		MatchJSON(t, "joined_members", field(members.Get("joined"), string(alice.UserID)), KeyEqual("display_name", name))

		// A later change reaches rooms already joined (Synapse rewrites the member events,
		// possibly just after the profile request returns).
		renamed := "Alice renamed " + s.runID
		alice.MustDo(t, "PUT", CS("v3", "profile", string(alice.UserID), "displayname"), map[string]any{"displayname": renamed})
		eventually(t, 10*time.Second, "renamed member in joined_members", func() (bool, string) {
			members := bob.MustDo(t, "GET", CS("v3", "rooms", string(room), "joined_members"), nil)
			got := field(members.Get("joined"), string(alice.UserID)).Get("display_name").String()
			return got == renamed, "display_name " + got
		})
		member := bob.MustDo(t, "GET", CS("v3", "rooms", string(room), "state", "m.room.member", string(alice.UserID)), nil)
		MatchJSON(t, "member event after rename", member, KeyEqual("displayname", renamed), KeyEqual("membership", "join"))
	})
}
