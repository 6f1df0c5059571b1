package conformance

import (
	"fmt"
	"net/http"
	"testing"
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

	t.Run("MalformedJSON", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "badjson")
		room := s.createRoom(t, alice, nil)
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
		alice := s.registerUser(t, "forge")
		room := s.createRoom(t, alice, nil)
		root := s.sendText(t, alice, room, s.label(t, 1)[0])
		s.sendThreadReply(t, alice, room, root, "reply")
		// Synapse rejects unparseable tokens with 400 and M_UNKNOWN or M_INVALID_PARAM depending
		// on the endpoint, so only a 400 Matrix error is required.
		forged := "zooid-forged-token"
		ExpectError(t, alice.Do(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "b"), WithQuery("from", forged)), http.StatusBadRequest)
		ExpectError(t, alice.Do(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "f"), WithQuery("from", forged)), http.StatusBadRequest)
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
