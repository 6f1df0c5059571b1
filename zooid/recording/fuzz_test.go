package recording

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes as a recorded scenario file: Parse returns a
// recording or an error naming the file, never a panic; a recording it accepts
// answers its accessors for every event.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(shipped + "*.json")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{"", "{}", "[]", `{"room": "#ops"}`, "null", `{"events": [{}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := Parse(bytes.NewReader(data), "fuzz.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if rec == nil {
			t.Fatal("no recording and no error")
		}
		for i := range rec.Events {
			rec.Relation(i)
			rec.Text(i)
			rec.IsHistory(i)
		}
	})
}
