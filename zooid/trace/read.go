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

// Read loads the trace in dir. A file of a newer format version, a line that
// does not parse, a record of an unknown kind or one cut short is refused
// with the file's name, line and reason. The one break tolerated is a last
// line without its newline in a room's newest segment: what a daemon killed
// mid-write leaves. The same in an older segment means the file was damaged
// after the daemon moved on, and is refused.
func Read(dir string) (*Trace, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	type seg struct {
		n    int
		path string
		recs []Record
		torn int // the line cut short, or 0
	}
	byRoom := map[id.RoomID][]seg{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		hdr, recs, torn, err := readFile(path)
		if err != nil {
			return nil, err
		}
		byRoom[hdr.Room] = append(byRoom[hdr.Room], seg{hdr.Segment, path, recs, torn})
	}
	t := &Trace{}
	for room, segs := range byRoom {
		sort.Slice(segs, func(i, j int) bool { return segs[i].n < segs[j].n })
		r := Room{ID: room}
		for i, s := range segs {
			if s.torn > 0 && i < len(segs)-1 {
				return nil, fmt.Errorf("%s:%d: the last line is cut short, and this is not the room's newest segment (a crash leaves a torn line only in the file being written)", s.path, s.torn)
			}
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
