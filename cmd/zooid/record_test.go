package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/scenarios"
)

// importRecording seeds fakehs with a recording, names as localparts on
// "localhost", and returns a token of its first member.
func importRecording(t *testing.T, srv *fakehs.Server, rec *scenarios.Recording, alias string) string {
	t.Helper()
	user := func(n string) id.UserID { return id.NewUserID(n, "localhost") }
	_, tok, err := srv.RegisterUser(rec.Members[0], rec.Members[0])
	if err != nil {
		t.Fatal(err)
	}
	seed := fakehs.RoomSeed{Creator: user(rec.Members[0]), Name: rec.Name, AliasLocalpart: alias, Preset: "public_chat"}
	for _, m := range rec.Members[1:] {
		seed.Members = append(seed.Members, user(m))
	}
	for i, e := range rec.Events {
		se := fakehs.SeedEvent{Sender: user(e.Sender), Type: e.Type, Content: rec.Content(i, user, nil),
			Timestamp: e.Timestamp, ThreadRoot: e.Thread}
		if rel, target, key := rec.Relation(i); rel != "" {
			se.Relation = &fakehs.SeedRelation{RelType: rel, Target: target, Key: key}
		}
		seed.Events = append(seed.Events, se)
	}
	if _, err := srv.ImportRoom(seed); err != nil {
		t.Fatal(err)
	}
	return tok
}

func runRecordOK(t *testing.T, args ...string) (*scenarios.Recording, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := runRecord(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("zooid record %v exited %d: %s", args, code, errb.String())
	}
	rec, err := scenarios.Parse(&out, "recorded")
	if err != nil {
		t.Fatalf("the recording does not load: %v\n%s", err, out.String())
	}
	return rec, errb.String()
}

// TestRecordRoundTrip replays the shipped incident into fakehs, records the
// room through the client-server API and checks that the recording is the
// original: members, order, senders, timestamps, types, relations, content.
func TestRecordRoundTrip(t *testing.T) {
	orig, err := scenarios.Load(filepath.Join("..", "..", "scenarios", "svc-a-incident.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := fakehs.New(t)
	tok := importRecording(t, srv, orig, "ops")
	got, _ := runRecordOK(t, "--homeserver", srv.URL(), "--token", tok, "--room", "#ops:localhost")

	if got.Name != orig.Name {
		t.Errorf("name %q, want %q", got.Name, orig.Name)
	}
	if want := sorted(orig.Members); !reflect.DeepEqual(got.Members, want) {
		t.Errorf("members %v, want %v", got.Members, want)
	}
	if len(got.Events) != len(orig.Events) {
		t.Fatalf("%d events recorded, want %d", len(got.Events), len(orig.Events))
	}
	user := func(n string) id.UserID { return id.NewUserID(n, "localhost") }
	for i, o := range orig.Events {
		g := got.Events[i]
		if g.Sender != o.Sender || !g.Timestamp.Equal(o.Timestamp) || g.Type != o.Type ||
			g.Thread != o.Thread || g.ReplyTo != o.ReplyTo || g.Edits != o.Edits || g.ReactsTo != o.ReactsTo || g.Key != o.Key {
			t.Errorf("event %d: got %+v, want %+v", i, g, o)
			continue
		}
		if gc, oc := asJSON(t, got.Content(i, user, nil)), asJSON(t, orig.Content(i, user, nil)); gc != oc {
			t.Errorf("event %d content:\n got %s\nwant %s", i, gc, oc)
		}
		if got.IsHistory(i) && got.Text(i) != orig.Text(i) {
			t.Errorf("event %d reads %q, want %q", i, got.Text(i), orig.Text(i))
		}
	}
	// In the file, member ids are short names, so it replays on any server.
	var b bytes.Buffer
	if err := got.Write(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), ":localhost") {
		t.Errorf("the recording names the recording server:\n%s", b.String())
	}
}

// TestRecordLimitDropsOrphans records only the newest events: what relates to
// an event outside the window is left out, and said so.
func TestRecordLimitDropsOrphans(t *testing.T) {
	orig, err := scenarios.Load(filepath.Join("..", "..", "scenarios", "svc-a-incident.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := fakehs.New(t)
	tok := importRecording(t, srv, orig, "ops")
	got, stderr := runRecordOK(t, "--homeserver", srv.URL(), "--token", tok, "--room", "#ops:localhost", "--limit", "4")
	// The newest four: mia's reply in the postmortem thread (its root is
	// older, so it goes), the timeline edit (its original goes too),
	// the timeline itself (thread reply, root outside) and the top-level "recovered".
	if len(got.Events) != 1 || got.Text(0) != orig.Text(len(orig.Events)-1) {
		t.Errorf("recorded %+v; want only the last top-level message", got.Events)
	}
	if !strings.Contains(stderr, "left out 3 events") {
		t.Errorf("stderr does not say what was left out: %s", stderr)
	}
}

func TestRecordShortNamesAndPrefixes(t *testing.T) {
	users := []id.UserID{"@zs-agent-a:localhost", "@Ori:example.org", "@1bot:example.org"}
	got, err := shortNames(users, []string{"zs-"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[id.UserID]string{"@zs-agent-a:localhost": "agent-a", "@Ori:example.org": "ori", "@1bot:example.org": "u-1bot"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	if _, err := shortNames([]id.UserID{"@ori:a.org", "@ori:b.org"}, nil); err == nil || !strings.Contains(err.Error(), `would both be called "ori"`) {
		t.Errorf("want a collision error, got %v", err)
	}
}

func TestRecordBadArguments(t *testing.T) {
	srv := fakehs.New(t)
	_, tok, err := srv.RegisterUser("ori", "ori")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--homeserver", srv.URL()}, 2, "need --token, --room"},
		{[]string{"--homeserver", srv.URL(), "--token", tok, "--room", "#ops:localhost", "--limit", "0"}, 2, "--limit of at least 1"},
		{[]string{"--homeserver", srv.URL(), "--token", tok, "--room", "ops"}, 1, "neither an alias"},
		{[]string{"--homeserver", srv.URL(), "--token", tok, "--room", "#nope:localhost"}, 1, "resolving #nope:localhost"},
		{[]string{"--homeserver", srv.URL(), "--token", "wrong", "--room", "!abc:localhost"}, 1, "reading !abc:localhost"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		code := runRecord(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
			t.Errorf("zooid record %v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out.String(), errb.String(), tc.code, tc.want)
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRecordRepliesRoundTrip sends a recording with rich replies through the
// client-server API (an import can't express m.in_reply_to) and records it:
// a reply keeps its target, a thread's fallback reply is no reply.
func TestRecordRepliesRoundTrip(t *testing.T) {
	orig, err := scenarios.Load(filepath.Join("..", "..", "scenarios", "deploy-review.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := fakehs.New(t)
	ctx := context.Background()
	clients := map[string]*mautrix.Client{}
	for _, m := range orig.Members {
		uid, tok, err := srv.RegisterUser(m, m)
		if err != nil {
			t.Fatal(err)
		}
		if clients[m], err = mautrix.NewClient(srv.URL(), uid, tok); err != nil {
			t.Fatal(err)
		}
	}
	first := clients[orig.Members[0]]
	room, err := first.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "public_chat", RoomAliasName: "dev", Name: orig.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range orig.Members[1:] {
		if _, err := clients[m].JoinRoom(ctx, string(room.RoomID), nil); err != nil {
			t.Fatal(err)
		}
	}
	user := func(n string) id.UserID { return id.NewUserID(n, "localhost") }
	var ids []id.EventID
	for i, e := range orig.Events {
		resp, err := clients[e.Sender].SendMessageEvent(ctx, room.RoomID, event.Type{Type: e.Type, Class: event.MessageEventType}, orig.Content(i, user, ids))
		if err != nil {
			t.Fatalf("sending event %d: %v", i, err)
		}
		ids = append(ids, resp.EventID)
	}
	got, _ := runRecordOK(t, "--homeserver", srv.URL(), "--token", first.AccessToken, "--room", "#dev:localhost")
	if len(got.Events) != len(orig.Events) {
		t.Fatalf("%d events recorded, want %d", len(got.Events), len(orig.Events))
	}
	for i, o := range orig.Events {
		g := got.Events[i]
		if g.Sender != o.Sender || g.Type != o.Type || g.Thread != o.Thread || g.ReplyTo != o.ReplyTo || g.ReactsTo != o.ReactsTo || g.Key != o.Key {
			t.Errorf("event %d: got %+v, want %+v", i, g, o)
		}
		if gc, oc := asJSON(t, got.Content(i, user, ids)), asJSON(t, orig.Content(i, user, ids)); gc != oc {
			t.Errorf("event %d content:\n got %s\nwant %s", i, gc, oc)
		}
	}
}
