package trace

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"maunium.net/go/mautrix/id"
)

// Trace is a trace directory loaded by Read.
type Trace struct {
	// Rooms are in the order of their ids.
	Rooms []Room
}

// Room is one room's records, in order, across its rotated files.
type Room struct {
	ID id.RoomID
	// Alias is the room's name in zooid.yaml, from its latest start record.
	Alias   string
	Records []Record
}

// Room returns the room with id r.
func (t *Trace) Room(r id.RoomID) (*Room, bool) {
	for i := range t.Rooms {
		if t.Rooms[i].ID == r {
			return &t.Rooms[i], true
		}
	}
	return nil, false
}

// Read loads the trace in dir. A file of a newer format version, or one that
// is broken anywhere but its last line, is refused with its name, line and
// reason.
func Read(dir string) (*Trace, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	type seg struct {
		n    int
		recs []Record
	}
	byRoom := map[id.RoomID][]seg{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		hdr, recs, err := readFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		byRoom[hdr.Room] = append(byRoom[hdr.Room], seg{hdr.Segment, recs})
	}
	t := &Trace{}
	for room, segs := range byRoom {
		sort.Slice(segs, func(i, j int) bool { return segs[i].n < segs[j].n })
		r := Room{ID: room}
		for _, s := range segs {
			r.Records = append(r.Records, s.recs...)
		}
		for _, rec := range r.Records {
			if rec.Kind == KindStart && rec.Start != nil && rec.Start.Alias != "" {
				r.Alias = rec.Start.Alias
			}
		}
		t.Rooms = append(t.Rooms, r)
	}
	sort.Slice(t.Rooms, func(i, j int) bool { return t.Rooms[i].ID < t.Rooms[j].ID })
	return t, nil
}
