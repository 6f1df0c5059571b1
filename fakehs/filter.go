package fakehs

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"maunium.net/go/mautrix/id"
)

// eventFilter is the spec's RoomEventFilter plus the relation filters
// (MSC3440 related_by_*, MSC3874 rel_types/not_rel_types).
type eventFilter struct {
	Limit             int       `json:"limit"`
	Types             *[]string `json:"types"`
	NotTypes          []string  `json:"not_types"`
	Senders           *[]string `json:"senders"`
	NotSenders        []string  `json:"not_senders"`
	Rooms             *[]string `json:"rooms"`
	NotRooms          []string  `json:"not_rooms"`
	RelatedByRelTypes []string  `json:"related_by_rel_types"`
	RelatedBySenders  []string  `json:"related_by_senders"`
	RelTypes          []string  `json:"rel_types"`
	NotRelTypes       []string  `json:"not_rel_types"`
	MSC3874RelTypes   []string  `json:"org.matrix.msc3874.rel_types"`
	MSC3874NotRel     []string  `json:"org.matrix.msc3874.not_rel_types"`
	ContainsURL       *bool     `json:"contains_url"`
	LazyLoadMembers   bool      `json:"lazy_load_members"`
	IncludeRedundant  bool      `json:"include_redundant_members"`
	UnreadThreadNotes bool      `json:"unread_thread_notifications"`
	// ignoreRel drops the relation filters (Profile.IgnoreRelationFilters).
	ignoreRel bool
}

// parseEventFilter reads a ?filter= JSON value (empty means no filter).
func parseEventFilter(raw string) (*eventFilter, error) {
	f := &eventFilter{}
	if raw == "" {
		return f, nil
	}
	if !json.Valid([]byte(raw)) {
		return nil, mErr(http.StatusBadRequest, "M_NOT_JSON", "Invalid JSON in filter")
	}
	if err := json.Unmarshal([]byte(raw), f); err != nil {
		return nil, errBadJSON("Invalid filter: %v", err)
	}
	if f.Limit < 0 {
		return nil, errBadJSON("Invalid filter: negative limit")
	}
	return f, nil
}

// matches reports whether e passes the filter within its room.
func (f *eventFilter) matches(e *evt) bool {
	if f == nil {
		return true
	}
	if f.Types != nil && !anyGlob(*f.Types, e.Type) {
		return false
	}
	if anyGlob(f.NotTypes, e.Type) {
		return false
	}
	if f.Senders != nil && !slices.Contains(*f.Senders, string(e.Sender)) {
		return false
	}
	if slices.Contains(f.NotSenders, string(e.Sender)) {
		return false
	}
	if f.ignoreRel {
		return f.ContainsURL == nil || hasURL(e) == *f.ContainsURL
	}
	if len(f.RelTypes)+len(f.MSC3874RelTypes) > 0 &&
		!slices.Contains(f.RelTypes, e.RelType) && !slices.Contains(f.MSC3874RelTypes, e.RelType) {
		return false
	}
	if e.RelType != "" && (slices.Contains(f.NotRelTypes, e.RelType) || slices.Contains(f.MSC3874NotRel, e.RelType)) {
		return false
	}
	if f.ContainsURL != nil && hasURL(e) != *f.ContainsURL {
		return false
	}
	return f.matchesRelatedBy(e)
}

// matchesRelatedBy keeps events that have a relation of the listed types
// (or from the listed senders) pointing at them, like thread roots.
func (f *eventFilter) matchesRelatedBy(e *evt) bool {
	if len(f.RelatedByRelTypes) == 0 && len(f.RelatedBySenders) == 0 {
		return true
	}
	for _, child := range e.Room.children[e.ID] {
		if (len(f.RelatedByRelTypes) == 0 || slices.Contains(f.RelatedByRelTypes, child.RelType)) &&
			(len(f.RelatedBySenders) == 0 || slices.Contains(f.RelatedBySenders, string(child.Sender))) {
			return true
		}
	}
	return false
}

func (f *eventFilter) matchesRoom(rid id.RoomID) bool {
	if f.Rooms != nil && !slices.Contains(*f.Rooms, string(rid)) {
		return false
	}
	return !slices.Contains(f.NotRooms, string(rid))
}

func hasURL(e *evt) bool {
	var c struct {
		URL string `json:"url"`
	}
	_ = json.Unmarshal(e.Content, &c)
	return c.URL != ""
}

func anyGlob(patterns []string, s string) bool {
	for _, p := range patterns {
		if glob(p, s) {
			return true
		}
	}
	return false
}

// glob matches a filter type pattern where '*' is any run of characters.
func glob(pattern, s string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == s
	}
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for i, part := range parts[1:] {
		if i == len(parts)-2 {
			return strings.HasSuffix(s, part)
		}
		j := strings.Index(s, part)
		if j < 0 {
			return false
		}
		s = s[j+len(part):]
	}
	return true
}

// syncFilter is the part of the spec's Filter that /sync honours.
type syncFilter struct {
	Room struct {
		Rooms        *[]string    `json:"rooms"`
		NotRooms     []string     `json:"not_rooms"`
		Timeline     *eventFilter `json:"timeline"`
		State        *eventFilter `json:"state"`
		IncludeLeave bool         `json:"include_leave"`
	} `json:"room"`
}

func parseSyncFilter(raw []byte) (*syncFilter, error) {
	f := &syncFilter{}
	if err := json.Unmarshal(raw, f); err != nil {
		return nil, errBadJSON("Invalid filter: %v", err)
	}
	return f, nil
}
