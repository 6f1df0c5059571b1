package fakehs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"maunium.net/go/mautrix/id"
)

// Pagination tokens are positions in the global stream: "events with a
// stream position <= pos are before this token". Because a room's events
// are ordered by stream position and new events only get larger ones, a
// token stays valid and gap-free while the room grows.
//
// A room token ("r…") is bound to its room by an HMAC under a per-server
// secret, so a forged token or another room's token is rejected with 400
// M_INVALID_PARAM. A sync token ("s…") is global; like Synapse, /messages
// also accepts it (clients pass a sync next_batch or prev_batch as from).

func (s *Server) mac(parts ...string) string {
	h := hmac.New(sha256.New, s.secret)
	h.Write([]byte(strings.Join(parts, "|")))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// roomToken makes a room-bound token for a position.
func (s *Server) roomToken(rid id.RoomID, pos int64) string {
	p := strconv.FormatInt(pos, 10)
	return "r" + p + "_" + s.mac("r", string(rid), p)
}

// syncToken makes a global sync token for a stream position.
func (s *Server) syncToken(pos int64) string {
	p := strconv.FormatInt(pos, 10)
	return "s" + p + "_" + s.mac("s", p)
}

// parseRoomToken accepts a room token for rid or a sync token.
func (s *Server) parseRoomToken(tok string, rid id.RoomID) (int64, error) {
	if strings.HasPrefix(tok, "s") {
		return s.parseSyncToken(tok)
	}
	kind, pos, mac, ok := splitToken(tok)
	if !ok || kind != "r" || !hmac.Equal([]byte(mac), []byte(s.mac("r", string(rid), strconv.FormatInt(pos, 10)))) {
		// Synapse answers unparseable tokens with 400 M_UNKNOWN ("'from' parameter is invalid").
		return 0, mErr(http.StatusBadRequest, "M_UNKNOWN", "Invalid pagination token %q", tok)
	}
	return pos, nil
}

// parseSyncToken accepts only a sync token.
func (s *Server) parseSyncToken(tok string) (int64, error) {
	kind, pos, mac, ok := splitToken(tok)
	if !ok || kind != "s" || !hmac.Equal([]byte(mac), []byte(s.mac("s", strconv.FormatInt(pos, 10)))) {
		// Synapse: 400 M_UNKNOWN "Invalid stream token".
		return 0, mErr(http.StatusBadRequest, "M_UNKNOWN", "Invalid stream token %q", tok)
	}
	return pos, nil
}

func splitToken(tok string) (kind string, pos int64, mac string, ok bool) {
	if len(tok) < 3 {
		return "", 0, "", false
	}
	num, mac, found := strings.Cut(tok[1:], "_")
	if !found {
		return "", 0, "", false
	}
	pos, err := strconv.ParseInt(num, 10, 64)
	if err != nil || pos < 0 {
		return "", 0, "", false
	}
	return tok[:1], pos, mac, true
}
