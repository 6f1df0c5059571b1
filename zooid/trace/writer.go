package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix/id"
)

// Recorder is what the daemon's parts call where something traceable happens.
// Off is the recorder when tracing is off; a *Writer is the one when it is on.
type Recorder interface {
	// Record appends r to its room's trace; a KindTurnEnd record is fsync'd.
	Record(r Record)
	// Enabled says whether records are kept, so a caller can skip building one.
	Enabled() bool
}

// Off records nothing.
var Off Recorder = off{}

type off struct{}

func (off) Record(Record) {}
func (off) Enabled() bool { return false }

// Or returns r, or Off when r is nil: parts take an optional Recorder.
func Or(r Recorder) Recorder {
	if r == nil {
		return Off
	}
	return r
}

// Defaults of Options.
const (
	// DefaultMaxFileSize rotates a room's file once it passes 64 MiB.
	DefaultMaxFileSize = 64 << 20
	// DefaultMaxTextSize bounds each text, argument and result in a record.
	DefaultMaxTextSize = 16 << 10
	// DefaultMaxFiles keeps a room's newest 16 files: 1 GiB at the default
	// file size, so a busy room cannot fill the disk while the trace still
	// reaches back far further than a recording does.
	DefaultMaxFiles = 16
)

// Options configure a Writer.
type Options struct {
	// Dir holds the trace files; it is created with mode 0700.
	Dir string
	// MaxFileSize rotates a room's file to a new segment once it holds that
	// many bytes; 0 means DefaultMaxFileSize.
	MaxFileSize int64
	// MaxFiles keeps at most that many files of each room: a rotation
	// deletes the oldest beyond it (and so does opening a trace that holds
	// more). 0 means DefaultMaxFiles; a negative number keeps every file.
	MaxFiles int
	// MaxTextSize bounds texts, tool arguments and results (their original
	// size is kept beside them); 0 means DefaultMaxTextSize.
	MaxTextSize int
	// Secrets are scrubbed from every line before it is written: the daemon
	// never hands them to the recorder, and this makes sure of it.
	Secrets []string
	// Logger reports write failures (once per room file); nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Writer writes a trace directory: one JSON-lines file per room, append-only,
// rotated by size. It is safe for concurrent use; rooms don't wait on each other.
type Writer struct {
	opts   Options
	log    *slog.Logger
	mu     sync.Mutex
	rooms  map[id.RoomID]*roomFile
	closed bool
}

type roomFile struct {
	mu      sync.Mutex
	room    id.RoomID
	base    string
	f       *os.File
	size    int64
	seq     uint64
	segment int
	existed bool // the room had records before this run
	failed  bool // a write failed: logged once
}

// Open creates (or continues) the trace in opts.Dir.
func Open(opts Options) (*Writer, error) {
	if opts.Dir == "" {
		return nil, errors.New("trace: no directory")
	}
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = DefaultMaxFileSize
	}
	if opts.MaxTextSize <= 0 {
		opts.MaxTextSize = DefaultMaxTextSize
	}
	if opts.MaxFiles == 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var secrets []string
	for _, s := range opts.Secrets {
		if s != "" {
			secrets = append(secrets, s)
		}
	}
	opts.Secrets = secrets
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating trace dir: %w", err)
	}
	return &Writer{opts: opts, log: log, rooms: map[id.RoomID]*roomFile{}}, nil
}

// Enabled is true: a Writer keeps what it is given.
func (w *Writer) Enabled() bool { return true }

// Existed says whether room's trace held records before this Writer opened it.
func (w *Writer) Existed(room id.RoomID) bool {
	rf, err := w.roomFile(room)
	return err == nil && rf.existed
}

// Record appends r to its room's file. Records without a room are dropped: a
// trace is per room. Failures are logged, never returned: tracing must not
// stop the daemon.
func (w *Writer) Record(r Record) {
	if r.Room == "" {
		return
	}
	rf, err := w.roomFile(r.Room)
	if err != nil {
		w.log.Error("trace: opening room file", "room", r.Room, "err", err)
		return
	}
	if r.Time.IsZero() {
		r.Time = w.opts.Now().UTC()
	}
	w.bound(&r)
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.f == nil {
		return // closed
	}
	rf.seq++
	r.Seq = rf.seq
	line, err := json.Marshal(r)
	if err != nil {
		w.log.Error("trace: encoding record", "kind", r.Kind, "err", err)
		return
	}
	line = w.scrub(line)
	line = append(line, '\n')
	if rf.size+int64(len(line)) > w.opts.MaxFileSize && rf.size > 0 {
		if err := w.rotate(rf); err != nil {
			w.fail(rf, "rotating", err)
			return
		}
	}
	n, err := rf.f.Write(line)
	rf.size += int64(n)
	if err != nil {
		w.fail(rf, "writing", err)
		return
	}
	if r.Kind == KindTurnEnd || r.Kind == KindStart {
		if err := rf.f.Sync(); err != nil {
			w.fail(rf, "syncing", err)
		}
	}
}

func (w *Writer) fail(rf *roomFile, what string, err error) {
	if !rf.failed {
		rf.failed = true
		w.log.Error("trace: "+what+" room file", "room", rf.room, "err", err)
	}
}

// Sync flushes every room file to disk.
func (w *Writer) Sync() error {
	var errs []error
	for _, rf := range w.files() {
		rf.mu.Lock()
		if rf.f != nil {
			errs = append(errs, rf.f.Sync())
		}
		rf.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Close syncs and closes every file; later records are dropped.
func (w *Writer) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	var errs []error
	for _, rf := range w.files() {
		rf.mu.Lock()
		if rf.f != nil {
			errs = append(errs, rf.f.Sync(), rf.f.Close())
			rf.f = nil
		}
		rf.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (w *Writer) files() []*roomFile {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*roomFile, 0, len(w.rooms))
	for _, rf := range w.rooms {
		out = append(out, rf)
	}
	return out
}

// bound cuts every free text of r to MaxTextSize, keeping the original size.
func (w *Writer) bound(r *Record) {
	n := w.opts.MaxTextSize
	switch {
	case r.Event != nil:
		e := *r.Event
		e.Text, e.TextSize = Bound(e.Text, n)
		r.Event = &e
	case r.Prompt != nil:
		p := *r.Prompt
		p.Text, p.TextSize = Bound(p.Text, n)
		r.Prompt = &p
	case r.Tool != nil:
		t := *r.Tool
		t.Args, t.ArgsSize = Bound(t.Args, n)
		t.Result, t.ResultSize = Bound(t.Result, n)
		t.Error, _ = Bound(t.Error, n)
		r.Tool = &t
	case r.Post != nil:
		p := *r.Post
		p.Text, p.TextSize = Bound(p.Text, n)
		r.Post = &p
	case r.Task != nil:
		t := *r.Task
		t.Output, _ = Bound(t.Output, n)
		r.Task = &t
	}
}

// scrub replaces any secret in an encoded line. Secrets are tokens (no JSON
// escapes), so they appear verbatim if at all.
func (w *Writer) scrub(line []byte) []byte {
	for _, s := range w.opts.Secrets {
		if bytes.Contains(line, []byte(s)) {
			line = bytes.ReplaceAll(line, []byte(s), []byte("[redacted]"))
		}
	}
	return line
}

// roomFile opens the room's newest segment, continuing its sequence, or
// creates the first one.
func (w *Writer) roomFile(room id.RoomID) (*roomFile, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rf, ok := w.rooms[room]; ok {
		return rf, nil
	}
	if w.closed {
		return nil, errors.New("trace writer is closed")
	}
	rf := &roomFile{room: room, base: filepath.Join(w.opts.Dir, FileBase(room))}
	segs, err := segments(rf.base)
	if err != nil {
		return nil, err
	}
	if len(segs) > 0 {
		last := segs[len(segs)-1]
		rf.segment = last.n
		hdr, recs, _, err := readFile(last.path)
		if err != nil {
			return nil, err
		}
		if hdr.Room != room {
			return nil, fmt.Errorf("%s: holds room %s, not %s", last.path, hdr.Room, room)
		}
		if len(recs) > 0 {
			rf.seq = recs[len(recs)-1].Seq
		}
		rf.existed = len(recs) > 0 || len(segs) > 1
		f, err := os.OpenFile(last.path, os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("continuing trace: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("continuing trace: %w", err)
		}
		rf.f, rf.size = f, st.Size()
		w.prune(rf)
	} else if err := w.newSegment(rf); err != nil {
		return nil, err
	}
	w.rooms[room] = rf
	return rf, nil
}

func (w *Writer) rotate(rf *roomFile) error {
	if err := rf.f.Sync(); err != nil {
		return err
	}
	if err := rf.f.Close(); err != nil {
		return err
	}
	rf.f = nil
	if err := w.newSegment(rf); err != nil {
		return err
	}
	w.prune(rf)
	return nil
}

// prune deletes the room's oldest files beyond MaxFiles, logging each: the
// trace is a flight recorder, and its newest part is what a recording takes.
func (w *Writer) prune(rf *roomFile) {
	if w.opts.MaxFiles < 0 {
		return
	}
	segs, err := segments(rf.base)
	if err != nil {
		w.log.Warn("listing the room's trace files to delete the oldest", "room", rf.room, "err", err)
		return
	}
	for len(segs) > w.opts.MaxFiles {
		if err := os.Remove(segs[0].path); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.log.Warn("deleting an old trace file", "room", rf.room, "file", segs[0].path, "err", err)
			return
		}
		w.log.Info("deleted the oldest trace file of the room: it keeps its newest files only", "room", rf.room, "file", segs[0].path, "max_files", w.opts.MaxFiles)
		segs = segs[1:]
	}
}

// newSegment starts the next file of the room with its header line.
func (w *Writer) newSegment(rf *roomFile) error {
	rf.segment++
	path := segmentPath(rf.base, rf.segment)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("creating trace file: %w", err)
	}
	hdr, _ := json.Marshal(Header{Format: FormatName, Version: Version, Room: rf.room, Segment: rf.segment, Created: w.opts.Now().UTC()})
	hdr = append(hdr, '\n')
	if _, err := f.Write(hdr); err != nil {
		f.Close()
		return fmt.Errorf("writing trace header: %w", err)
	}
	rf.f, rf.size = f, int64(len(hdr))
	return nil
}

// FormatName is the Format of every header line.
const FormatName = "zooid-trace"

// FileBase is the file name stem of a room's trace: the room id with every
// byte outside [A-Za-z0-9!:._-] percent-encoded.
func FileBase(room id.RoomID) string {
	var b strings.Builder
	for _, c := range []byte(room) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '!', c == ':', c == '.', c == '_', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func segmentPath(base string, n int) string {
	return fmt.Sprintf("%s.%06d.jsonl", base, n)
}

type segment struct {
	n    int
	path string
}

// segments lists the files of the room whose stem is base, oldest first.
func segments(base string) ([]segment, error) {
	matches, err := filepath.Glob(globEscape(base) + ".*.jsonl")
	if err != nil {
		return nil, err
	}
	var out []segment
	for _, m := range matches {
		num := strings.TrimSuffix(strings.TrimPrefix(m, base+"."), ".jsonl")
		n, err := strconv.Atoi(num)
		if err != nil || len(num) != 6 {
			continue
		}
		out = append(out, segment{n, m})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n < out[j].n })
	return out, nil
}

func globEscape(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `\`, `\\`)
	return r.Replace(s)
}

// readFile reads one segment: its header and records. A last line without
// its newline that does not parse is what a crash mid-write leaves (the
// writer puts each line with its newline in one write): it is dropped and
// its line is returned as torn, so Read can refuse it anywhere but a room's newest segment.
// Any other bad line — one that does not parse, a record of an unknown kind,
// one cut short — is an error naming the file and line.
func readFile(path string) (hdr Header, recs []Record, torn int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Header{}, nil, 0, err
		}
		return Header{}, nil, 0, fmt.Errorf("reading trace: %w", err)
	}
	if len(data) == 0 {
		return hdr, nil, 0, fmt.Errorf("%s:1: empty trace file", path)
	}
	line := 0
	for len(data) > 0 {
		line++
		b, rest, complete := bytes.Cut(data, []byte("\n"))
		data = rest
		if line == 1 {
			if err := json.Unmarshal(b, &hdr); err != nil || hdr.Format != FormatName {
				return hdr, nil, 0, fmt.Errorf("%s:1: not a zooid trace file (no header line)", path)
			}
			if hdr.Version > Version || hdr.Version < 1 {
				return hdr, nil, 0, fmt.Errorf("%s:1: trace format version %d; this zooid reads version %d and older", path, hdr.Version, Version)
			}
			continue
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			if !complete {
				return hdr, recs, line, nil
			}
			return hdr, nil, 0, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if err := r.Check(); err != nil {
			return hdr, nil, 0, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		recs = append(recs, r)
	}
	return hdr, recs, 0, nil
}
