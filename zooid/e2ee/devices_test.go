//go:build goolm

package e2ee

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeysAreTheDaemonsAlone: the key directory is 0700 and its files 0600,
// even where the directory existed with a looser mode, so no agent running
// under another uid (or group) reads a key.
func TestKeysAreTheDaemonsAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "e2ee")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key, err := loadPickleKey(filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(key) != 32 {
		t.Fatalf("pickle key of %d bytes, want 32", len(key))
	}
	db, err := openDB(context.Background(), filepath.Join(dir, dbFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// Open makes the directory private; do what it does.
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"": 0o700, keyFile: 0o600, dbFile: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", filepath.Join("e2ee", name), got, want)
		}
	}
	again, err := loadPickleKey(filepath.Join(dir, keyFile))
	if err != nil || !bytes.Equal(again, key) {
		t.Errorf("a second start read the pickle key as %x (%v), want the first one", again, err)
	}
}

// TestALostPickleKeyStopsTheStart: a database whose pickle key is gone (or
// cut short) cannot be opened; the start stops and says how to recover,
// rather than making a new key the old sessions do not open with.
func TestALostPickleKeyStopsTheStart(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, dbFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadPickleKey(filepath.Join(dir, keyFile))
	if err == nil || !strings.Contains(err.Error(), "is missing but crypto.db exists") {
		t.Errorf("pickle key missing beside a database: err %v, want the missing-key error", err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyFile), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = loadPickleKey(filepath.Join(dir, keyFile))
	if err == nil || !strings.Contains(err.Error(), "holds 5 bytes") {
		t.Errorf("a 5-byte pickle key: err %v, want the length error", err)
	}
}

// TestMautrixLinesKeepTheirLevel: mautrix's zerolog lines reach slog at the
// level they were logged at, with their fields.
func TestMautrixLinesKeepTheirLevel(t *testing.T) {
	var buf bytes.Buffer
	w := slogWriter{log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, line := range []string{
		`{"level":"warn","message":"Dropping OTK counts targeted to someone else","target_user_id":"@x:hs"}`,
		`{"level":"debug","message":"to-device"}`,
		`not json`,
	} {
		if _, err := w.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	var got []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		got = append(got, m)
	}
	if len(got) != 3 {
		t.Fatalf("%d records, want 3: %s", len(got), buf.String())
	}
	if got[0]["level"] != "WARN" || got[0]["msg"] != "mautrix crypto: Dropping OTK counts targeted to someone else" || got[0]["target_user_id"] != "@x:hs" {
		t.Errorf("first record %v", got[0])
	}
	if got[1]["level"] != "DEBUG" || got[2]["msg"] != "not json" {
		t.Errorf("records %v, %v", got[1], got[2])
	}
}
