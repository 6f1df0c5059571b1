package history

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/tools"
)

// Stream modes a cursor can continue.
const (
	modeMessages  = "m" // /messages backwards
	modeRelations = "r" // /relations/{root}/m.thread backwards
	modeScan      = "s" // /messages backwards, filtered to one thread (fallback)
)

// cursor is the opaque next_before: a scan position bound to the tool, room,
// thread and user it was issued for. Token is the pagination token the chunk
// holding Last was fetched from (pinned, so arrivals don't shift it); the next
// page resumes right after Last.
type cursor struct {
	Tool   string     `json:"k"`
	User   id.UserID  `json:"u"`
	Room   id.RoomID  `json:"r"`
	Thread id.EventID `json:"t,omitempty"`
	Mode   string     `json:"m"`
	Token  string     `json:"p,omitempty"`
	Last   id.EventID `json:"l"`
	// Top is the pinned token of the first page's first chunk; Pending says
	// the pages so far met thread replies or edits whose root or original
	// they had not reached, so the next page scans again from Top to count
	// them (servers without bundled aggregations).
	Top     string `json:"h,omitempty"`
	Pending bool   `json:"x,omitempty"`
	// Fresh says the next page starts at the top of the thread's replies:
	// a first page of thread history with limit 1 held only the root.
	Fresh bool `json:"f,omitempty"`
}

// sealScan seals the cursor of a page read by a /messages scan: Pending
// when the scan met replies (counted only when replies) or edits of events
// not reached yet, or could not count everything above; what the next page
// needs is kept for it (keepCarried).
func (h *Reader) sealScan(c cursor, st *scanState, complete, replies bool) string {
	c.Pending = !complete || st.pending(c.Last, replies)
	s := h.sealCursor(c)
	if c.Pending && complete {
		h.keepCarried(s, st.unreached(c.Last))
	}
	return s
}

func (h *Reader) sealCursor(c cursor) string {
	body, _ := json.Marshal(c)
	mac := hmac.New(sha256.New, h.key)
	mac.Write(body)
	return base64.RawURLEncoding.EncodeToString(body) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// openCursor verifies a cursor and that it was issued for exactly this tool,
// caller, room and thread: anything else is refused, never misread.
func (h *Reader) openCursor(s, tool string, user id.UserID, room id.RoomID, thread id.EventID) (cursor, error) {
	bad := tools.Errorf(tools.CodeInvalidCursor, "before is not a cursor this tool issued; pass next_before back untouched, or omit before for the newest page")
	b64, tag64, ok := strings.Cut(s, ".")
	if !ok {
		return cursor{}, bad
	}
	body, err1 := base64.RawURLEncoding.Strict().DecodeString(b64)
	tag, err2 := base64.RawURLEncoding.Strict().DecodeString(tag64)
	if err1 != nil || err2 != nil {
		return cursor{}, bad
	}
	mac := hmac.New(sha256.New, h.key)
	mac.Write(body)
	if !hmac.Equal(tag, mac.Sum(nil)) {
		return cursor{}, bad
	}
	var c cursor
	if err := json.Unmarshal(body, &c); err != nil || (c.Last == "" && !c.Fresh) {
		return cursor{}, bad
	}
	if c.Tool != tool {
		return cursor{}, tools.Errorf(tools.CodeInvalidCursor, "this cursor belongs to another tool; use it only with the tool whose next_before it was")
	}
	if c.Room != room || c.User != user {
		return cursor{}, tools.Errorf(tools.CodeInvalidCursor, "this cursor belongs to another room")
	}
	if c.Thread != thread {
		return cursor{}, tools.Errorf(tools.CodeInvalidCursor, "this cursor belongs to another thread")
	}
	return c, nil
}
