package history

import (
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/zooid/tools"
)

func TestCursorRoundTripAndRefusals(t *testing.T) {
	h := New(Options{})
	c := cursor{Tool: toolThread, User: "@a:x", Room: "!r:x", Thread: "$t", Mode: modeRelations, Token: "s12", Last: "$e"}
	s := h.sealCursor(c)
	got, err := h.openCursor(s, toolThread, "@a:x", "!r:x", "$t")
	if err != nil || got != c {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	refused := func(name, s, tool string, user, room, thread string) {
		t.Helper()
		_, err := h.openCursor(s, tool, idU(user), idR(room), idE(thread))
		te, ok := err.(*tools.Error)
		if !ok || te.Code != tools.CodeInvalidCursor {
			t.Errorf("%s: want invalid_cursor, got %v", name, err)
		}
	}
	refused("other tool", s, toolHistory, "@a:x", "!r:x", "$t")
	refused("other room", s, toolThread, "@a:x", "!q:x", "$t")
	refused("other thread", s, toolThread, "@a:x", "!r:x", "$u")
	refused("other user", s, toolThread, "@b:x", "!r:x", "$t")
	for i := range len(s) {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		refused("tampered byte", string(b), toolThread, "@a:x", "!r:x", "$t")
	}
	refused("truncated", s[:len(s)-3], toolThread, "@a:x", "!r:x", "$t")
	refused("no tag", strings.Split(s, ".")[0], toolThread, "@a:x", "!r:x", "$t")
	refused("empty", "", toolThread, "@a:x", "!r:x", "$t")
	// Another daemon's key (a restart) makes old cursors invalid, not misread.
	other := New(Options{})
	if _, err := other.openCursor(s, toolThread, "@a:x", "!r:x", "$t"); err == nil {
		t.Fatal("cursor accepted under another key")
	}
}

func TestTextRendering(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want string
		ok   bool
	}{
		{`{"msgtype":"m.text","body":"hi"}`, "hi", true},
		{`{"msgtype":"m.notice","body":"note"}`, "note", true},
		{`{"msgtype":"m.emote","body":"waves"}`, "* waves", true},
		{`{"msgtype":"m.image","body":"x","filename":"cat.png"}`, "[image: cat.png]", true},
		{`{"msgtype":"m.file","body":"report.pdf"}`, "[file: report.pdf]", true},
		{`{}`, "", false},
		{`{"msgtype":"m.text","body":"* e","m.new_content":{"body":"e"},"m.relates_to":{"rel_type":"m.replace","event_id":"$x"}}`, "", false},
	} {
		evt := msgEvent(tc.raw)
		got, ok := text(evt)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %q %v", tc.raw, got, ok)
		}
	}
}
