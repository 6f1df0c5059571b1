package conformance

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func (s *suite) testErrors(t *testing.T) {
	t.Parallel()

	t.Run("MissingToken", func(t *testing.T) {
		t.Parallel()
		c := s.unauthed()
		ExpectStatus(t, c.Do(t, "GET", CS("v3", "account", "whoami"), nil), http.StatusUnauthorized, "M_MISSING_TOKEN")
		ExpectStatus(t, c.Do(t, "GET", CS("v3", "joined_rooms"), nil), http.StatusUnauthorized, "M_MISSING_TOKEN")
	})

	t.Run("UnknownToken", func(t *testing.T) {
		t.Parallel()
		c := s.unauthed()
		c.AccessToken = "conformance-not-a-token-" + s.runID
		ExpectStatus(t, c.Do(t, "GET", CS("v3", "account", "whoami"), nil), http.StatusUnauthorized, "M_UNKNOWN_TOKEN")
		ExpectStatus(t, c.Do(t, "GET", CS("v3", "sync"), nil, WithQuery("timeout", "0")), http.StatusUnauthorized, "M_UNKNOWN_TOKEN")
	})

	t.Run("UnknownEndpointIsUnrecognized", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "unrec")
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "zooid_no_such_endpoint"), nil), http.StatusNotFound, "M_UNRECOGNIZED")
		ExpectStatus(t, alice.Do(t, "POST", "/_matrix/client/v3/rooms/!nope:"+s.target.ServerName+"/zooid_nonsense", map[string]any{}),
			http.StatusNotFound, "M_UNRECOGNIZED")
		// A known path with an unsupported method: Synapse says 405 M_UNRECOGNIZED.
		ExpectStatus(t, alice.Do(t, "DELETE", CS("v3", "account", "whoami"), nil), http.StatusMethodNotAllowed, "M_UNRECOGNIZED")
	})

	t.Run("TypingOnlyForYourself", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "typer", "typed")
		body := map[string]any{"typing": true, "timeout": 3000}
		alice.MustDo(t, "PUT", CS("v3", "rooms", string(room), "typing", string(alice.UserID)), body)
		// Synapse: typing as someone else is 400 (not 403) M_FORBIDDEN.
		ExpectStatus(t, alice.Do(t, "PUT", CS("v3", "rooms", string(room), "typing", string(bob.UserID)), body), http.StatusBadRequest, "M_FORBIDDEN")
		if _, err := alice.Mautrix(t).UserTyping(context.Background(), room, true, 3*time.Second); err != nil {
			t.Fatalf("mautrix UserTyping: %v", err)
		}
	})

	t.Run("SynapseErrorCodes", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "codes")
		ghostUser := "@conformance-nobody-" + s.runID + ":" + s.target.ServerName
		ghostRoom := "!conformance-no-such-room-" + s.runID + ":" + s.target.ServerName
		// Profiles of unknown users: the whole profile is 404 M_UNKNOWN, the display name 404
		// M_NOT_FOUND (the spec says M_NOT_FOUND for both).
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "profile", ghostUser), nil), http.StatusNotFound, "M_UNKNOWN")
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "profile", ghostUser, "displayname"), nil), http.StatusNotFound, "M_NOT_FOUND")
		// Joining an unknown room id: Synapse takes it for a remote room and, with no server to
		// ask, answers 404 M_UNKNOWN.
		ExpectStatus(t, alice.Do(t, "POST", CS("v3", "join", ghostRoom), map[string]any{}), http.StatusNotFound, "M_UNKNOWN")
		ExpectStatus(t, alice.Do(t, "POST", CS("v3", "rooms", ghostRoom, "join"), map[string]any{}), http.StatusNotFound, "M_UNKNOWN")
		// Schema errors in createRoom are M_BAD_JSON, not M_INVALID_PARAM.
		ExpectStatus(t, alice.Do(t, "POST", CS("v3", "createRoom"), map[string]any{"preset": "zooid_no_such_preset"}), http.StatusBadRequest, "M_BAD_JSON")
		// A sync token Synapse cannot parse is 400 M_UNKNOWN; a filter id it does not know is
		// 400 M_INVALID_PARAM (though GET /filter/{id} says 404 M_NOT_FOUND).
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "sync"), nil, WithQuery("since", "zooid-garbage"), WithQuery("timeout", "0")), http.StatusBadRequest, "M_UNKNOWN")
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "sync"), nil, WithQuery("filter", "987654"), WithQuery("timeout", "0")), http.StatusBadRequest, "M_INVALID_PARAM")
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "sync"), nil, WithQuery("filter", "zooid"), WithQuery("timeout", "0")), http.StatusBadRequest, "M_INVALID_PARAM")
	})

	t.Run("MalformedJSON", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "badjson")
		// Synapse answers unparseable bodies with M_NOT_JSON and a non-object with M_BAD_JSON.
		ExpectStatus(t, alice.Do(t, "PUT", CS("v3", "rooms", string(room), "send", "m.room.message", "conf-"+randomID(6)), []byte(`{"msgtype":`)),
			http.StatusBadRequest, "M_NOT_JSON")
		ExpectStatus(t, alice.Do(t, "POST", CS("v3", "createRoom"), []byte(`not json`)), http.StatusBadRequest, "M_NOT_JSON")
		ExpectStatus(t, alice.Do(t, "POST", CS("v3", "createRoom"), []byte(`["an","array"]`)), http.StatusBadRequest, "M_BAD_JSON")
		// Nothing was posted by the refused requests.
		res := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "b"),
			WithQuery("filter", `{"types":["m.room.message"]}`))
		if n := len(res.Get("chunk").Array()); n != 0 {
			t.Fatalf("malformed sends left %d messages: %s", n, res.Raw)
		}
	})

	t.Run("ForgedPaginationTokensRejected", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "forge")
		root := s.sendText(t, alice, room, s.label(t, 1)[0])
		s.sendThreadReply(t, alice, room, root, "reply")
		// Synapse rejects unparseable tokens with 400 and M_UNKNOWN or M_INVALID_PARAM depending
		// on the endpoint, so only a 400 Matrix error is required.
		forged := "zooid-forged-token"
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "b"), WithQuery("from", forged)), http.StatusBadRequest, "M_UNKNOWN")
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "f"), WithQuery("from", forged)), http.StatusBadRequest, "M_UNKNOWN")
		ExpectError(t, alice.Do(t, "GET", CS("v1", "rooms", string(room), "relations", string(root), "m.thread"), nil, WithQuery("from", forged)), http.StatusBadRequest)
		ExpectError(t, alice.Do(t, "GET", CS("v1", "rooms", string(room), "threads"), nil, WithQuery("from", forged)), http.StatusBadRequest)
		ExpectError(t, alice.Do(t, "GET", CS("v3", "sync"), nil, WithQuery("since", forged), WithQuery("timeout", "0")), http.StatusBadRequest)
		ExpectError(t, alice.Do(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "sideways")), http.StatusBadRequest)

		// A real token with junk appended is tampered, not merely unknown.
		for i := 0; i < 3; i++ {
			s.sendThreadReply(t, alice, room, root, fmt.Sprintf("more-%d", i))
		}
		msgs := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "b"), WithQuery("limit", "1"))
		rels := alice.MustDo(t, "GET", CS("v1", "rooms", string(room), "relations", string(root), "m.thread"), nil, WithQuery("limit", "1"))
		sync := alice.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("timeout", "0"))
		for _, tok := range []string{msgs.Get("end").String(), rels.Get("next_batch").String(), sync.Get("next_batch").String()} {
			if tok == "" {
				t.Fatalf("missing a real token to tamper with: /messages end %q, relations next_batch %q, sync next_batch %q",
					msgs.Get("end").String(), rels.Get("next_batch").String(), sync.Get("next_batch").String())
			}
		}
		ExpectError(t, alice.Do(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "b"), WithQuery("from", msgs.Get("end").String()+"zz")), http.StatusBadRequest)
		ExpectError(t, alice.Do(t, "GET", CS("v1", "rooms", string(room), "relations", string(root), "m.thread"), nil, WithQuery("from", rels.Get("next_batch").String()+"zz")), http.StatusBadRequest)
		ExpectError(t, alice.Do(t, "GET", CS("v3", "sync"), nil, WithQuery("since", sync.Get("next_batch").String()+"zz"), WithQuery("timeout", "0")), http.StatusBadRequest)
	})
}
