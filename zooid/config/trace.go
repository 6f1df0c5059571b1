package config

import (
	"strconv"
	"strings"
)

// Trace turns on the daemon's flight recorder (zooid/trace): `trace:` in
// zooid.yaml, or `zooid run --trace DIR`.
type Trace struct {
	// Dir holds one JSON-lines file per room (and its rotated successors).
	Dir string
	// MaxFileSize rotates a room's file beyond that many bytes; zero means
	// the trace package's default (64 MiB).
	MaxFileSize int64
	// MaxFiles keeps each room's newest that many files; zero means the
	// trace package's default (16), negative keeps all (`max_files: all`).
	MaxFiles int
}

// trace reads the optional top-level trace mapping: {dir, max_file_size, max_files}.
func (p *parser) trace(top map[string]field) *Trace {
	f, ok := top["trace"]
	if !ok || isNull(deref(f.val)) {
		return nil
	}
	tf := p.fields(f.val, "trace", "dir", "max_file_size", "max_files")
	t := &Trace{}
	dir, ok := p.str(tf["dir"], "trace.dir")
	if !ok || dir == "" {
		if _, given := tf["dir"]; !given {
			p.errorf(f.key, "trace", "dir is required: the directory the trace is written to")
		}
		return nil
	}
	t.Dir = p.abs(dir)
	if v, ok := p.str(tf["max_file_size"], "trace.max_file_size"); ok && v != "" {
		n, err := parseSize(v)
		if err != nil {
			p.errorf(tf["max_file_size"].val, "trace.max_file_size", "%v", err)
		}
		t.MaxFileSize = n
	}
	if v, ok := p.str(tf["max_files"], "trace.max_files"); ok && v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case v == "all":
			t.MaxFiles = -1
		case err != nil || n < 2:
			p.errorf(tf["max_files"].val, "trace.max_files", "must be a number of files, at least 2 (the one being written and the one before it), or all; got %s", v)
		default:
			t.MaxFiles = n
		}
	}
	return t
}

// parseSize reads a byte count such as 1048576, 512KiB, 64MiB or 1GiB.
func parseSize(v string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}, {"", 1}}
	for _, u := range units {
		num, ok := strings.CutSuffix(v, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
		if err != nil || n < 1 {
			break
		}
		if n*u.mult < 4096 {
			return 0, errorString("must be at least 4KiB, got " + v)
		}
		return n * u.mult, nil
	}
	return 0, errorString("must be a size such as 64MiB, 512KiB or a byte count, got " + strconv.Quote(v))
}

type errorString string

func (e errorString) Error() string { return string(e) }
