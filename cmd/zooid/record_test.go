package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/recording"
)

// importRecording seeds fakehs with a recording, names as localparts on
// "localhost", and returns a token of its first member.
func importRecording(t *testing.T, srv *fakehs.Server, rec *recording.Recording, alias string) string {
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

// withToken is a lookupEnv that holds the record token, as the environment would.
func withToken(tok string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if k == recordTokenEnv {
			return tok, true
		}
		return "", false
	}
}

func runRecordOK(t *testing.T, tok string, args ...string) (*recording.Recording, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := runRecord(context.Background(), args, withToken(tok), &out, &errb); code != 0 {
		t.Fatalf("zooid record %v exited %d: %s", args, code, errb.String())
	}
	rec, err := recording.Parse(&out, "recorded")
	if err != nil {
		t.Fatalf("the recording does not load: %v\n%s", err, out.String())
	}
	return rec, errb.String()
}

// TestRecordRoundTrip replays the shipped incident into fakehs, records the
// room through the client-server API and checks that the recording is the
// original: members, order, senders, timestamps, types, relations, content.
func TestRecordRoundTrip(t *testing.T) {
	orig, err := recording.Load(filepath.Join("..", "..", "scenarios", "svc-a-incident.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := fakehs.New(t)
	tok := importRecording(t, srv, orig, "ops")
	got, _ := runRecordOK(t, tok, "--homeserver", srv.URL(), "--room", "#ops:localhost")

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
	orig, err := recording.Load(filepath.Join("..", "..", "scenarios", "svc-a-incident.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := fakehs.New(t)
	tok := importRecording(t, srv, orig, "ops")
	got, stderr := runRecordOK(t, tok, "--homeserver", srv.URL(), "--room", "#ops:localhost", "--limit", "4")
	// The newest four: mia's reply in the postmortem thread (its root is
	// older, so it goes), the timeline edit (its original goes too),
	// the timeline itself (thread reply, root outside) and the top-level "recovered".
	if len(got.Events) != 1 || got.Text(0) != orig.Text(len(orig.Events)-1) {
		t.Errorf("recorded %+v; want only the last top-level message", got.Events)
	}
	if !strings.Contains(stderr, "warning: left out 3 events relating to events before the first recorded one") || got.LeftOut["outside_window"] != 3 {
		t.Errorf("stderr does not say what was left out: %s", stderr)
	}
}

func TestRecordBadArguments(t *testing.T) {
	srv := fakehs.New(t)
	_, tok, err := srv.RegisterUser("ori", "ori")
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	plainCfg, encCfg := recordConfig(t, false), recordConfig(t, true)
	cases := []struct {
		args []string
		env  string
		code int
		want string
	}{
		{[]string{"--homeserver", srv.URL()}, tok, 2, "need --room"},
		{[]string{"--homeserver", srv.URL(), "--room", "#ops:localhost", "--limit", "0"}, tok, 2, "--limit of at least 1"},
		{[]string{"--homeserver", srv.URL(), "--room", "ops"}, tok, 1, "neither an alias"},
		{[]string{"--homeserver", srv.URL(), "--room", "#nope:localhost"}, tok, 1, "resolving #nope:localhost"},
		{[]string{"--homeserver", srv.URL(), "--room", "!abc:localhost"}, "wrong", 1, "reading !abc:localhost"},
		{[]string{"--homeserver", srv.URL(), "--token", tok, "--room", "#ops:localhost"}, "", 2, "--token is no longer accepted"},
		{[]string{"--homeserver", srv.URL(), "--room", "#ops:localhost"}, "", 2, "no access token: set $ZOOID_RECORD_TOKEN or give --token-file"},
		{[]string{"--homeserver", srv.URL(), "--room", "#ops:localhost", "--token-file", empty}, "", 2, "is empty"},
		{[]string{"--homeserver", srv.URL(), "--room", "#ops:localhost", "--token-file", tokFile, "--as-user", "bot"}, "", 2, "--as-user \"bot\" is not a user id"},
		{[]string{"--homeserver", srv.URL(), "--room", "#ops:localhost", "--decrypt"}, tok, 2, "--decrypt needs --config (the daemon whose state_dir holds the devices) and --as-user"},
		{[]string{"--homeserver", srv.URL(), "--room", "#ops:localhost", "--decrypt", "--as-user", "@agent-a:localhost", "--config", plainCfg}, tok, 1, "does not set encryption: true, so its agents have no devices"},
		{[]string{"--homeserver", srv.URL(), "--room", "#ops:localhost", "--decrypt", "--as-user", "@ori:localhost", "--config", encCfg}, tok, 1, "@ori:localhost is not a Matrix agent of"},
		{[]string{"--homeserver", srv.URL(), "--room", "#ops:localhost", "--decrypt", "--as-user", "@agent-a:localhost", "--config", encCfg}, tok, 1, "no devices in"},
		// The token file wins over the environment: a wrong token there is used and refused.
		{[]string{"--homeserver", srv.URL(), "--room", "!abc:localhost", "--token-file", tokFile}, "wrong", 1, "reading !abc:localhost: M_FORBIDDEN"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		code := runRecord(context.Background(), tc.args, withToken(tc.env), &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
			t.Errorf("zooid record %v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out.String(), errb.String(), tc.code, tc.want)
		}
	}
}

// recordConfig writes a zooid.yaml with agent-a, encryption on or off.
func recordConfig(t *testing.T, encryption bool) string {
	t.Helper()
	dir := t.TempDir()
	body := fmt.Sprintf(`state_dir: %q
encryption: %t
transports:
  matrix:
    type: matrix
    homeserver: http://127.0.0.1:8008
    server_name: localhost
    as_token: as-token-of-thirty-two-characters-x
    hs_token: hs-token-of-thirty-two-characters-x
    listen: 127.0.0.1:9000
agents:
  agent-a:
    acp:
      command: /bin/true
    matrix:
      user_id: "@agent-a:localhost"
      rooms: ["#ops:localhost"]
`, filepath.Join(dir, "state"), encryption)
	path := filepath.Join(dir, "zooid.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
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
	orig, err := recording.Load(filepath.Join("..", "..", "scenarios", "deploy-review.json"))
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
	got, _ := runRecordOK(t, first.AccessToken, "--homeserver", srv.URL(), "--room", "#dev:localhost")
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

// worldRoom builds #ops on fakehs with what real rooms hold besides plain
// messages: threads, a poll and its m.reference response, an unknown event
// type, an unknown relation, an encrypted event, two roots with the same
// first words. It returns the server and the appservice token.
func worldRoom(t *testing.T) (*fakehs.Server, string) {
	t.Helper()
	reg := &appservice.Registration{ID: "zooid", AppToken: "as-secret", ServerToken: "hs-secret", SenderLocalpart: "zooid"}
	reg.Namespaces.UserIDs = appservice.NamespaceList{{Regex: "@agent-.*:localhost", Exclusive: true}}
	srv := fakehs.New(t, fakehs.WithAppservice(reg))
	ctx := context.Background()
	clients := map[string]*mautrix.Client{}
	for _, m := range []string{"ori", "mia"} {
		uid, tok, err := srv.RegisterUser(m, m)
		if err != nil {
			t.Fatal(err)
		}
		clients[m], _ = mautrix.NewClient(srv.URL(), uid, tok)
	}
	bot, _ := mautrix.NewClient(srv.URL(), "@agent-a:localhost", reg.AppToken)
	bot.SetAppServiceUserID = true
	if _, _, err := bot.Register(ctx, &mautrix.ReqRegister[any]{Username: "agent-a", Type: mautrix.AuthTypeAppservice, InhibitLogin: true}); err != nil {
		t.Fatal(err)
	}
	clients["agent-a"] = bot
	room, err := clients["ori"].CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "public_chat", RoomAliasName: "ops", Name: "ops room"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"mia", "agent-a"} {
		if _, err := clients[m].JoinRoom(ctx, string(room.RoomID), nil); err != nil {
			t.Fatal(err)
		}
	}
	var ids []id.EventID
	send := func(who, typ string, content map[string]any) {
		t.Helper()
		resp, err := clients[who].SendMessageEvent(ctx, room.RoomID, event.Type{Type: typ, Class: event.MessageEventType}, content)
		if err != nil {
			t.Fatalf("%s sending %s: %v", who, typ, err)
		}
		ids = append(ids, resp.EventID)
	}
	thread := func(root int) map[string]any {
		return map[string]any{"rel_type": "m.thread", "event_id": string(ids[root]), "is_falling_back": true,
			"m.in_reply_to": map[string]any{"event_id": string(ids[len(ids)-1])}}
	}
	send("ori", "m.room.message", map[string]any{"msgtype": "m.text", "body": "svc-a is slow, @agent-a:localhost please look",
		"m.mentions": map[string]any{"user_ids": []any{"@agent-a:localhost"}}}) // 0
	send("agent-a", "m.room.message", map[string]any{"msgtype": "m.notice", "body": "Looking at svc-a now.", "m.relates_to": thread(0)}) // 1
	send("mia", "org.matrix.msc3381.poll.start", map[string]any{"org.matrix.msc3381.poll.start": map[string]any{
		"question": map[string]any{"body": "Roll back 8812?"}, "kind": "org.matrix.msc3381.poll.disclosed",
		"answers": []any{map[string]any{"id": "yes", "org.matrix.msc1767.text": "Yes"}, map[string]any{"id": "no", "org.matrix.msc1767.text": "No"}}},
		"org.matrix.msc1767.text": "Roll back 8812?"}) // 2
	send("ori", "org.matrix.msc3381.poll.response", map[string]any{"org.matrix.msc3381.poll.response": map[string]any{"answers": []any{"yes"}},
		"m.relates_to": map[string]any{"rel_type": "m.reference", "event_id": string(ids[2])}}) // 3
	send("mia", "com.example.widget", map[string]any{"state": "open", "count": 3}) // 4
	send("ori", "m.room.message", map[string]any{"msgtype": "m.text", "body": "see above",
		"m.relates_to": map[string]any{"rel_type": "com.example.pin", "event_id": string(ids[0]), "why": "root cause"}}) // 5
	send("ori", "m.room.encrypted", map[string]any{"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEn...", "session_id": "s", "sender_key": "k", "device_id": "D"})
	send("mia", "m.room.message", map[string]any{"msgtype": "m.text", "body": "svc-a is slow again"}) // 6 once recorded (the encrypted one is skipped)
	send("mia", "m.room.message", map[string]any{"msgtype": "m.emote", "body": "looks at the graphs", "m.relates_to": thread(7)})
	return srv, reg.AppToken
}

// TestRecordKeepsTheWorld records a room as an appservice user: agents with
// their rooms and trigger, every relation (m.reference and an unknown one
// verbatim), unknown event types, the encrypted event counted with a
// warning, and labels made for the thread roots.
func TestRecordKeepsTheWorld(t *testing.T) {
	srv, asToken := worldRoom(t)
	tokFile := filepath.Join(t.TempDir(), "as-token")
	if err := os.WriteFile(tokFile, []byte(asToken), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := runRecord(context.Background(), []string{"--homeserver", srv.URL(), "--token-file", tokFile, "--as-user", "@agent-a:localhost",
		"--room", "#ops:localhost", "--agent", "@agent-a:localhost"}, withToken(""), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	rec, err := recording.Parse(bytes.NewReader(out.Bytes()), "recorded")
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if rec.Version != recording.Version || rec.Room != "#ops" {
		t.Errorf("version %d room %q, want %d and #ops", rec.Version, rec.Room, recording.Version)
	}
	if a, ok := rec.Agents["agent-a"]; !ok || !reflect.DeepEqual(a.Rooms, []string{"#ops"}) || a.Trigger != "mention" || len(rec.Agents) != 1 {
		t.Errorf("agents %+v; want agent-a in #ops on mention only", rec.Agents)
	}
	if len(rec.Events) != 8 {
		t.Fatalf("%d events recorded, want 8 (9 sent, 1 encrypted):\n%s", len(rec.Events), out.String())
	}
	const why = "warning: left out 1 encrypted events: the room is end-to-end encrypted and zooid record read it without keys"
	if rec.LeftOut["encrypted"] != 1 || !strings.Contains(errb.String(), why) {
		t.Errorf("left out %v, stderr %q; want the encrypted event counted and warned of, saying why: %q", rec.LeftOut, errb.String(), why)
	}
	types := []string{"m.room.message", "m.room.message", "org.matrix.msc3381.poll.start", "org.matrix.msc3381.poll.response",
		"com.example.widget", "m.room.message", "m.room.message", "m.room.message"}
	for i, tp := range types {
		if rec.Events[i].Type != tp {
			t.Errorf("event %d type %s, want %s", i, rec.Events[i].Type, tp)
		}
	}
	if o := rec.Events[3].Other; o == nil || o.RelType != "m.reference" || o.Target != 2 || len(o.Fields) != 0 {
		t.Errorf("poll response relation %+v, want m.reference to event 2", o)
	}
	if o := rec.Events[5].Other; o == nil || o.RelType != "com.example.pin" || o.Target != 0 || o.Fields["why"] != "root cause" {
		t.Errorf("unknown relation %+v, want com.example.pin to event 0 with why kept", o)
	}
	if c := rec.Events[4].Content; asJSON(t, c) != `{"count":3,"state":"open"}` {
		t.Errorf("unknown event content %s", asJSON(t, c))
	}
	if rec.Events[1].Thread != 0 || rec.Events[7].Thread != 6 {
		t.Errorf("threads %d %d, want 0 and 6", rec.Events[1].Thread, rec.Events[7].Thread)
	}
	if rec.Events[0].Label != "svc-a-is-slow" || rec.Events[6].Label != "svc-a-is-slow-2" {
		t.Errorf("labels %q %q, want svc-a-is-slow and svc-a-is-slow-2", rec.Events[0].Label, rec.Events[6].Label)
	}
	for i, e := range rec.Events {
		if i != 0 && i != 6 && e.Label != "" {
			t.Errorf("event %d is no thread root yet labelled %q", i, e.Label)
		}
	}
	// The same room records the same file: labels are stable.
	var again, errb2 bytes.Buffer
	if code := runRecord(context.Background(), []string{"--homeserver", srv.URL(), "--room", "#ops:localhost", "--as-user", "@agent-a:localhost",
		"--agent", "@agent-a:localhost"}, withToken(asToken), &again, &errb2); code != 0 || again.String() != out.String() {
		t.Errorf("a second recording differs (exit %d, %s):\n%s\nvs\n%s", code, errb2.String(), again.String(), out.String())
	}
}

// TestRecordAnonymize: people become pseudonyms, words same-shape words;
// mentions, threads, relations, types and msgtypes stay exactly as they were.
func TestRecordAnonymize(t *testing.T) {
	srv, asToken := worldRoom(t)
	args := []string{"--homeserver", srv.URL(), "--room", "#ops:localhost", "--as-user", "@agent-a:localhost", "--agent", "@agent-a:localhost"}
	plain, _ := runRecordOK(t, asToken, args...)
	var out, errb bytes.Buffer
	if code := runRecord(context.Background(), append(args, "--anonymize"), withToken(asToken), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	anon, err := recording.Parse(bytes.NewReader(out.Bytes()), "anon")
	if err != nil {
		t.Fatal(err)
	}
	for _, word := range []string{`"ori"`, `"mia"`, "slow", "graphs", "Roll back", "Looking", "ops room"} {
		if strings.Contains(out.String(), word) {
			t.Errorf("the anonymized recording still holds %q:\n%s", word, out.String())
		}
	}
	if want := []string{"agent-a", "person-2", "person-1"}; !reflect.DeepEqual(anon.Members, want) {
		t.Errorf("members %v, want %v (ori spoke first)", anon.Members, want)
	}
	if len(anon.Events) != len(plain.Events) {
		t.Fatalf("%d events, want %d", len(anon.Events), len(plain.Events))
	}
	shape := regexp.MustCompile(`\p{Lu}`)
	for i, p := range plain.Events {
		a := anon.Events[i]
		if a.Type != p.Type || a.Thread != p.Thread || a.ReplyTo != p.ReplyTo || a.Edits != p.Edits ||
			a.ReactsTo != p.ReactsTo || asJSON(t, a.Other != nil) != asJSON(t, p.Other != nil) {
			t.Errorf("event %d changed structure: %+v vs %+v", i, a, p)
		}
		if a.Content["msgtype"] != p.Content["msgtype"] {
			t.Errorf("event %d msgtype %v, want %v", i, a.Content["msgtype"], p.Content["msgtype"])
		}
		pb, _ := p.Content["body"].(string)
		ab, _ := a.Content["body"].(string)
		if pb == "" {
			continue
		}
		if ab == pb {
			t.Errorf("event %d body unchanged: %q", i, ab)
		}
		// Same shape: the same runes count, the same non-letters in place, capitals where they were.
		pr, ar := []rune(strings.ReplaceAll(pb, "@agent-a", "@AGENTA")), []rune(strings.ReplaceAll(ab, "@agent-a", "@AGENTA"))
		if len(pr) != len(ar) {
			t.Errorf("event %d body %q has another length than %q", i, ab, pb)
			continue
		}
		for k := range pr {
			if unicode.IsLetter(pr[k]) != unicode.IsLetter(ar[k]) || unicode.IsDigit(pr[k]) != unicode.IsDigit(ar[k]) ||
				(!unicode.IsLetter(pr[k]) && !unicode.IsDigit(pr[k]) && pr[k] != ar[k]) || shape.MatchString(string(pr[k])) != shape.MatchString(string(ar[k])) {
				t.Errorf("event %d body %q is not the shape of %q at %d", i, ab, pb, k)
				break
			}
		}
	}
	if b := anon.Events[0].Content["body"].(string); !strings.Contains(b, "@agent-a ") {
		t.Errorf("the mention is gone: %q", b)
	}
	if got := asJSON(t, anon.Events[0].Content["m.mentions"]); got != `{"user_ids":["agent-a"]}` {
		t.Errorf("m.mentions %s", got)
	}
	if anon.Events[3].Sender != "person-1" || anon.Events[6].Sender != "person-2" {
		t.Errorf("senders %s %s, want person-1 (ori) and person-2 (mia)", anon.Events[3].Sender, anon.Events[6].Sender)
	}
	if anon.Events[0].Label == "" || anon.Events[0].Label == plain.Events[0].Label {
		t.Errorf("label %q: want one made from the new text", anon.Events[0].Label)
	}
	// The same word maps to the same word: "svc-a is slow" starts both roots.
	if a0, a6 := anon.Events[0].Content["body"].(string), anon.Events[6].Content["body"].(string); a0[:13] != a6[:13] {
		t.Errorf("the same words differ: %q vs %q", a0, a6)
	}
}

var update = flag.Bool("update", false, "rewrite the shipped recordings that are recorder output (scenarios/svc-a-incident.json)")

// TestShippedRecordingIsRecorderOutput holds scenarios/svc-a-incident.json to
// what `zooid record` writes for the room it describes: the file is imported
// into fakehs and recorded back (its agents named with --agent), and the
// bytes must be the same, so the shipped file is recorder output in the
// current format, not hand-written. -update rewrites it.
func TestShippedRecordingIsRecorderOutput(t *testing.T) {
	path := filepath.Join("..", "..", "scenarios", "svc-a-incident.json")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := recording.Parse(bytes.NewReader(want), path)
	if err != nil {
		t.Fatal(err)
	}
	srv := fakehs.New(t)
	tok := importRecording(t, srv, orig, "ops")
	args := []string{"--homeserver", srv.URL(), "--room", "#ops:localhost"}
	for _, m := range orig.Members {
		if _, ok := orig.Agents[m]; ok || strings.HasPrefix(m, "agent-") {
			args = append(args, "--agent", "@"+m+":localhost")
		}
	}
	var out, errb bytes.Buffer
	if code := runRecord(context.Background(), args, withToken(tok), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if out.String() != string(want) {
		t.Errorf("%s is not what zooid record writes for its room (go test ./cmd/zooid -run %s -update rewrites it):\n%s", path, t.Name(), out.String())
	}
}

// TestRecordAgentsFromConfig: --config marks the daemon's Matrix agents as
// agents with the rooms and trigger zooid.yaml gives them.
func TestRecordAgentsFromConfig(t *testing.T) {
	srv, asToken := worldRoom(t)
	dir := t.TempDir()
	t.Setenv("REC_AS_TOKEN", "as-0123456789abcdef")
	t.Setenv("REC_HS_TOKEN", "hs-0123456789abcdef")
	cfg := `transports:
  matrix:
    homeserver: ` + srv.URL() + `
    server_name: localhost
    as_token: ${REC_AS_TOKEN}
    hs_token: ${REC_HS_TOKEN}
    listen: 127.0.0.1:9
agents:
  agent-a:
    acp: { preset: claude }
    matrix:
      user_id: '@agent-a'
      rooms: ['#ops', '#Dev-Room', '!abc:localhost']
      trigger: any
`
	cfgPath := filepath.Join(dir, "zooid.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	rec, _ := runRecordOK(t, asToken, "--homeserver", srv.URL(), "--room", "#ops:localhost", "--as-user", "@agent-a:localhost", "--config", cfgPath)
	if a, ok := rec.Agents["agent-a"]; !ok || !reflect.DeepEqual(a.Rooms, []string{"#ops", "#dev-room"}) || a.Trigger != "any" {
		t.Errorf("agents %+v; want agent-a in #ops and #dev-room on any message (the room id has no name steps can use)", rec.Agents)
	}
	if len(rec.Agents) != 1 {
		t.Errorf("agents %+v; ori and mia are humans", rec.Agents)
	}
}

// TestRecordCarriesTheTrace: --trace DIR embeds the recorded room's trace
// files in segment order and no other room's; a broken line is refused
// with the file and line.
func TestRecordCarriesTheTrace(t *testing.T) {
	srv, asToken := worldRoom(t)
	room, ok := srv.RoomIDForAlias("#ops:localhost")
	if !ok {
		t.Fatal("no #ops")
	}
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.000002.jsonl", `{"format":"zooid-trace","version":1,"room":"`+string(room)+`","segment":2}`+"\n"+`{"seq":3,"kind":"post"}`+"\n")
	write("a.000001.jsonl", `{"format":"zooid-trace","version":1,"room":"`+string(room)+`","segment":1}`+"\n"+`{"seq":1,"kind":"start"}`+"\n\n"+`{"seq":2,"kind":"event"}`+"\n")
	write("b.000001.jsonl", `{"format":"zooid-trace","version":1,"room":"!other:localhost","segment":1}`+"\n"+`{"seq":1,"kind":"start"}`+"\n")
	args := []string{"--homeserver", srv.URL(), "--room", "#ops:localhost", "--as-user", "@agent-a:localhost", "--trace", dir}
	rec, _ := runRecordOK(t, asToken, args...)
	var kinds []string
	for _, l := range rec.Trace {
		var r struct {
			Kind    string `json:"kind"`
			Segment int    `json:"segment"`
		}
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, fmt.Sprintf("%s%d", r.Kind, r.Segment))
	}
	if want := []string{"1", "start0", "event0", "2", "post0"}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("trace lines %v, want %v (header 1, start, event, header 2, post)", kinds, want)
	}
	write("a.000003.jsonl", `{"format":"zooid-trace","version":1,"room":"`+string(room)+`","segment":3}`+"\n"+`{"seq":4,`+"\n")
	var out, errb bytes.Buffer
	if code := runRecord(context.Background(), args, withToken(asToken), &out, &errb); code != 1 || !strings.Contains(errb.String(), "a.000003.jsonl:2: a trace line is one JSON object") {
		t.Errorf("exit %d, stderr %q; want 1 and the broken line named", code, errb.String())
	}
}
