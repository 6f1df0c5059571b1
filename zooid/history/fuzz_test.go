package history

import (
	"reflect"
	"testing"
	"unicode/utf8"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/tools"
)

// FuzzOpenCursor feeds arbitrary before values to the cursor decoder: a value
// it refuses is an invalid_cursor tool error, and one it accepts re-encodes
// to a cursor that opens equal.
func FuzzOpenCursor(f *testing.F) {
	h := &Reader{key: []byte("fuzz-cursor-key-0123456789abcdef")}
	const (
		tool = "zooid_get_history"
		user = id.UserID("@agent:hs")
		room = id.RoomID("!room:hs")
	)
	valid := h.sealCursor(cursor{Tool: tool, User: user, Room: room, Mode: modeMessages, Token: "t1", Last: "$last", Top: "t0", Pending: true})
	for _, s := range []string{valid, "", ".", "a.b", valid + "x", "e30.AAAA", valid[:len(valid)/2]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := h.openCursor(s, tool, user, room, "")
		if err != nil {
			te, ok := err.(*tools.Error)
			if !ok || te.Code != tools.CodeInvalidCursor {
				t.Fatalf("openCursor(%q) refused with %v, want an invalid_cursor tool error", s, err)
			}
			return
		}
		again, err := h.openCursor(h.sealCursor(c), tool, user, room, "")
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("cursor %+v re-encodes to %+v, %v", c, again, err)
		}
	})
}

// FuzzCursorRoundTrip seals arbitrary cursor fields: every sealed cursor with
// a position opens to the same fields.
func FuzzCursorRoundTrip(f *testing.F) {
	h := &Reader{key: []byte("fuzz-cursor-key-0123456789abcdef")}
	f.Add("zooid_get_history", "@a:hs", "!r:hs", "", "m", "tok", "$last", "", false)
	f.Add("zooid_get_thread_history", "@a:hs", "!r:hs", "$root", "s", "", "$e", "top", true)
	f.Fuzz(func(t *testing.T, tool, user, room, thread, mode, token, last, top string, pending bool) {
		for _, s := range []string{tool, user, room, thread, mode, token, last, top} {
			if !utf8.ValidString(s) {
				// JSON replaces invalid UTF-8; ids and tokens from a homeserver are text.
				return
			}
		}
		c := cursor{Tool: tool, User: id.UserID(user), Room: id.RoomID(room), Thread: id.EventID(thread), Mode: mode, Token: token, Last: id.EventID(last), Top: top, Pending: pending}
		got, err := h.openCursor(h.sealCursor(c), tool, c.User, c.Room, c.Thread)
		if last == "" {
			if err == nil {
				t.Fatalf("a cursor without a position opened: %+v", got)
			}
			return
		}
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("cursor %+v opened as %+v", c, got)
		}
	})
}
