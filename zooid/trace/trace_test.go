package trace_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/trace"
)

// run writes one small room's trace as a daemon would, with every
// run-dependent id derived from suffix, and lets edit change records first.
func run(t *testing.T, suffix string, edit func([]trace.Record) []trace.Record) string {
	t.Helper()
	dir := t.TempDir()
	w, err := trace.Open(trace.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	room := id.RoomID("!room" + suffix + ":hs" + suffix)
	alice := id.UserID("@alice:hs" + suffix)
	agentA := id.UserID("@agent-a:hs" + suffix)
	root := id.EventID("$root0000" + suffix)
	reply := id.EventID("$reply000" + suffix)
	post := id.EventID("$post0000" + suffix)
	sess := "agent-a|" + string(room) + "|" + string(root)
	recs := []trace.Record{
		{Kind: trace.KindStart, Start: &trace.Start{Alias: "#general", Agents: []string{"agent-a"}}},
		{Kind: trace.KindEvent, Event: &trace.Event{ID: root, Sender: alice, Type: "m.room.message", MsgType: "m.text", Text: "@agent-a:hs" + suffix + " hi",
			Woke: []trace.Wake{{Agent: "agent-a", Thread: root, Session: sess, Why: trace.WhyMention}}}},
		{Kind: trace.KindPrompt, Session: sess, Prompt: &trace.Prompt{Agent: "agent-a", Turn: string(root), Trigger: root, Fresh: true,
			Text: "[zooid] room #general (" + string(room) + "), thread " + string(root) + "\n\nhi"}},
		{Kind: trace.KindTool, Session: sess, Tool: &trace.ToolCall{Agent: "agent-a", Tool: "zooid_get_recent_threads", Args: `{"limit":5}`,
			Result: `{"threads":[{"id":"` + string(root) + `","timestamp":"2026-12-0` + suffix[:1] + `T00:00:00Z"}],"next_before":"cur` + suffix + `","has_more":true}`}},
		{Kind: trace.KindPost, Post: &trace.Post{ID: post, Sender: agentA, Type: "m.room.message", MsgType: "m.notice", Thread: root, Text: "hello", TxnID: "zooid.aaaaaaaaaaaaaaaaaaaaaaa" + suffix[:1]}},
		{Kind: trace.KindTurnEnd, Session: sess, TurnEnd: &trace.TurnEnd{Agent: "agent-a", Turn: string(root), Stop: "end_turn"}},
		{Kind: trace.KindEvent, Event: &trace.Event{ID: post, Sender: agentA, Type: "m.room.message", MsgType: "m.notice", Thread: root, Text: "hello", Nobody: trace.WhyAgentPost}},
		{Kind: trace.KindEvent, Event: &trace.Event{ID: reply, Sender: alice, Type: "m.room.message", MsgType: "m.text", Thread: root, Text: "thanks",
			Woke: []trace.Wake{{Agent: "agent-a", Thread: root, Session: sess, Why: trace.WhyAddressee}}}},
	}
	for i := range recs {
		recs[i].Room = room
	}
	if edit != nil {
		recs = edit(recs)
	}
	for _, r := range recs {
		w.Record(r)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func read(t *testing.T, dir string) *trace.Trace {
	t.Helper()
	tr, err := trace.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestCompareEqualRunsOnDifferentServers(t *testing.T) {
	want, got := read(t, run(t, "1", nil)), read(t, run(t, "2", nil))
	if d := trace.Compare(want, got); len(d) != 0 {
		t.Fatalf("want no diff between runs that differ only in ids, got:\n%s", d)
	}
}

func TestCompareNamesAnEditedRoutingDecision(t *testing.T) {
	want := read(t, run(t, "1", nil))
	got := read(t, run(t, "2", func(rs []trace.Record) []trace.Record {
		rs[7].Event.Woke, rs[7].Event.Nobody = nil, trace.WhyNotNotified
		return rs
	}))
	d := trace.Compare(want, got)
	if len(d) != 1 {
		t.Fatalf("want exactly one difference, got %d:\n%s", len(d), d)
	}
	s := d.String()
	for _, part := range []string{"#general, routing", "event $reply0001 from @alice:hs1", `"thanks"`, "want woke agent-a (addressee, thread $root00001)", "got woke nobody (nobody_addressed)"} {
		if !strings.Contains(s, part) {
			t.Errorf("diff does not say %q:\n%s", part, s)
		}
	}
}

// decided gives every event record a decision, as today's daemon writes
// them; change edits the one of the reply.
func decided(change func(*trace.Decision)) func([]trace.Record) []trace.Record {
	return func(rs []trace.Record) []trace.Record {
		for _, r := range rs {
			if r.Event != nil {
				r.Event.Decision = &trace.Decision{}
			}
		}
		if change != nil {
			change(rs[7].Event.Decision)
		}
		return rs
	}
}

// Two traces that both recorded the router's whole decision are compared on
// all of it: a reply that now recalls its thread first is one difference.
func TestCompareNamesAChangedDecision(t *testing.T) {
	want := read(t, run(t, "1", decided(nil)))
	if d := trace.Compare(want, read(t, run(t, "2", decided(nil)))); len(d) != 0 {
		t.Fatalf("want no diff between decided runs, got:\n%s", d)
	}
	got := read(t, run(t, "2", decided(func(d *trace.Decision) { d.Recall = true })))
	d := trace.Compare(want, got)
	if len(d) != 1 {
		t.Fatalf("want exactly one difference, got %d:\n%s", len(d), d)
	}
	const line = `#general, routing: event $reply0001 from @alice:hs1 in thread $root00001 "thanks": ` +
		`want woke agent-a (addressee, thread $root00001); got woke agent-a (addressee, thread $root00002); thread recalled`
	if d[0].String() != line {
		t.Fatalf("diff:\n got %s\nwant %s", d[0], line)
	}
	got = read(t, run(t, "2", decided(func(d *trace.Decision) { d.TaskRoot = "agent-a" })))
	if d := trace.Compare(want, got); len(d) != 1 || !strings.HasSuffix(d[0].What, "; task root of agent-a") {
		t.Fatalf("want one difference naming the task root, got:\n%s", d)
	}
}

// A trace written before the decision was recorded (no "decision" on its
// event records) still compares: on whom each event woke, and why nobody.
func TestCompareATraceFromBeforeDecisionsOnWhomItWoke(t *testing.T) {
	old := read(t, run(t, "1", nil))
	for _, r := range old.Rooms[0].Records {
		if r.Event != nil && r.Event.Decision != nil {
			t.Fatalf("an event written without a decision reads back with one: %+v", r.Event.Decision)
		}
	}
	got := read(t, run(t, "2", decided(func(d *trace.Decision) { d.Recall = true })))
	if d := trace.Compare(old, got); len(d) != 0 {
		t.Fatalf("want no diff against a trace that did not record recalls, got:\n%s", d)
	}
	got = read(t, run(t, "2", func(rs []trace.Record) []trace.Record {
		rs = decided(nil)(rs)
		rs[7].Event.Woke, rs[7].Event.Nobody = nil, trace.WhyNotNotified
		return rs
	}))
	d := trace.Compare(old, got)
	if len(d) != 1 || !strings.HasSuffix(d[0].What, "want woke agent-a (addressee, thread $root00001); got woke nobody (nobody_addressed)") {
		t.Fatalf("want one difference in whom the reply woke, got:\n%s", d)
	}
}

// The daemon's empty decision is written as {}, which is what tells a
// record that has one from a record written before.
func TestWriterKeepsAnEmptyDecision(t *testing.T) {
	dir := t.TempDir()
	w, err := trace.Open(trace.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	w.Record(trace.Record{Room: "!r:x", Kind: trace.KindEvent, Event: &trace.Event{ID: "$e", Sender: "@a:x", Type: "m.room.message", Nobody: trace.WhyNotNotified, Decision: &trace.Decision{}}})
	w.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"decision":{}`) {
		t.Fatalf("the record does not carry an empty decision:\n%s", b)
	}
	if e := read(t, dir).Rooms[0].Records[0].Event; e.Decision == nil || *e.Decision != (trace.Decision{}) {
		t.Fatalf("read back as %+v", e.Decision)
	}
}

func TestCompareNamesAMissingPost(t *testing.T) {
	want := read(t, run(t, "1", nil))
	got := read(t, run(t, "2", func(rs []trace.Record) []trace.Record {
		return append(rs[:4:4], rs[5:]...)
	}))
	d := trace.Compare(want, got)
	if len(d) != 1 {
		t.Fatalf("want exactly one difference, got %d:\n%s", len(d), d)
	}
	want1 := `#general, posts by @agent-a:hs1 in thread $root00001: missing: post $post00001 by @agent-a:hs1 (m.room.message m.notice) "hello"`
	if d[0].String() != want1 {
		t.Fatalf("diff:\n got %s\nwant %s", d[0], want1)
	}
}

func TestCompareRefusesToMapOneIDToTwo(t *testing.T) {
	// got's reply wakes agent-a in a thread other than the root's: the root
	// is already paired, so the thread cannot be.
	want := read(t, run(t, "1", nil))
	got := read(t, run(t, "2", func(rs []trace.Record) []trace.Record {
		rs[7].Event.Woke = []trace.Wake{{Agent: "agent-a", Thread: "$other0002", Session: "x", Why: trace.WhyAddressee}}
		return rs
	}))
	d := trace.Compare(want, got)
	if len(d) != 1 || !strings.Contains(d[0].What, "thread $other0002") {
		t.Fatalf("want one difference naming the other thread, got:\n%s", d)
	}
}

func TestCompareToolResultDiffers(t *testing.T) {
	want := read(t, run(t, "1", nil))
	got := read(t, run(t, "2", func(rs []trace.Record) []trace.Record {
		rs[3].Tool.Result = `{"threads":[],"has_more":false}`
		return rs
	}))
	d := trace.Compare(want, got)
	if len(d) != 1 || !strings.Contains(d[0].String(), "session agent-a in thread $root00001") || !strings.Contains(d[0].What, `result {"threads":[],"has_more":false}`) {
		t.Fatalf("want one difference naming the tool result, got:\n%s", d)
	}
}

func TestWriterBoundsTextAndKeepsSize(t *testing.T) {
	dir := t.TempDir()
	w, err := trace.Open(trace.Options{Dir: dir, MaxTextSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	w.Record(trace.Record{Room: "!r:x", Kind: trace.KindTool, Tool: &trace.ToolCall{Agent: "a", Tool: "t", Args: "{}", Result: strings.Repeat("é", 20)}})
	w.Close()
	tr := read(t, dir)
	got := tr.Rooms[0].Records[0].Tool
	if got.Result != strings.Repeat("é", 5) || got.ResultSize != 40 || got.ArgsSize != 0 {
		t.Fatalf("bounded result = %q (size %d, args size %d), want 5 runes and size 40", got.Result, got.ResultSize, got.ArgsSize)
	}
}

func TestWriterRotatesAndContinuesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() *trace.Writer {
		w, err := trace.Open(trace.Options{Dir: dir, MaxFileSize: 400})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open()
	for i := 0; i < 10; i++ {
		w.Record(trace.Record{Room: "!r:x", Kind: trace.KindPrompt, Prompt: &trace.Prompt{Agent: "a", Text: strings.Repeat("x", 100)}})
	}
	w.Close()
	w = open()
	if !w.Existed("!r:x") {
		t.Fatal("a reopened trace does not know the room had records")
	}
	w.Record(trace.Record{Room: "!r:x", Kind: trace.KindStart, Start: &trace.Start{Restart: true}})
	w.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) < 3 {
		t.Fatalf("want the room rotated into at least 3 files of 400 bytes, got %v", files)
	}
	for _, f := range files {
		st, _ := os.Stat(f)
		if st.Size() > 400 {
			t.Errorf("%s is %d bytes, over the 400-byte limit", f, st.Size())
		}
	}
	recs := read(t, dir).Rooms[0].Records
	if len(recs) != 11 {
		t.Fatalf("read %d records, want 11", len(recs))
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d: order lost across rotation or restart", i, r.Seq)
		}
	}
}

// TestWriterKeepsTheNewestFiles: rotation deletes a room's oldest files
// beyond MaxFiles, the rest still reads as the room's newest records in
// order, and a trace reopened with a lower limit is cut to it at its
// room's first record.
func TestWriterKeepsTheNewestFiles(t *testing.T) {
	dir := t.TempDir()
	files := func() []string {
		fs, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		for i := range fs {
			fs[i] = filepath.Base(fs[i])
		}
		return fs
	}
	w, err := trace.Open(trace.Options{Dir: dir, MaxFileSize: 400, MaxFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		w.Record(trace.Record{Room: "!r:x", Kind: trace.KindPrompt, Prompt: &trace.Prompt{Agent: "a", Text: strings.Repeat("x", 100)}})
	}
	w.Close()
	// A record of about 250 bytes and a header fill a 400-byte file: 30
	// records make 30 files, of which the newest 3 are kept.
	if got, want := files(), []string{"!r:x.000028.jsonl", "!r:x.000029.jsonl", "!r:x.000030.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("files after 30 records in 400-byte files, at most 3 kept: %v, want %v", got, want)
	}
	recs := read(t, dir).Rooms[0].Records
	if len(recs) != 3 || recs[0].Seq != 28 || recs[2].Seq != 30 {
		t.Fatalf("read %d records (first seq %d), want the newest 3, seq 28 to 30", len(recs), recs[0].Seq)
	}
	w, err = trace.Open(trace.Options{Dir: dir, MaxFileSize: 400, MaxFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	w.Record(trace.Record{Room: "!r:x", Kind: trace.KindStart, Start: &trace.Start{Restart: true}})
	w.Close()
	if got, want := files(), []string{"!r:x.000030.jsonl", "!r:x.000031.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("files after a record rotated the reopened trace: %v, want %v", got, want)
	}
	if recs := read(t, dir).Rooms[0].Records; recs[len(recs)-1].Seq != 31 {
		t.Fatalf("the record after reopening has seq %d, want 31: the sequence continues", recs[len(recs)-1].Seq)
	}
	// Every file is kept when asked.
	all := t.TempDir()
	w, _ = trace.Open(trace.Options{Dir: all, MaxFileSize: 400, MaxFiles: -1})
	for i := 0; i < 40; i++ {
		w.Record(trace.Record{Room: "!r:x", Kind: trace.KindPrompt, Prompt: &trace.Prompt{Agent: "a", Text: strings.Repeat("x", 100)}})
	}
	w.Close()
	if fs, _ := filepath.Glob(filepath.Join(all, "*.jsonl")); len(fs) != 40 {
		t.Fatalf("with every file kept, 40 records made %d files, want 40", len(fs))
	}
}

func TestWriterScrubsSecrets(t *testing.T) {
	dir := t.TempDir()
	w, _ := trace.Open(trace.Options{Dir: dir, Secrets: []string{"syt_secret_token"}})
	w.Record(trace.Record{Room: "!r:x", Kind: trace.KindPost, Post: &trace.Post{Sender: "@a:x", Text: "leaked syt_secret_token here"}})
	w.Close()
	if got := read(t, dir).Rooms[0].Records[0].Post.Text; got != "leaked [redacted] here" {
		t.Fatalf("post text = %q, want the secret redacted", got)
	}
}

func TestReadRefusesNewerVersionAndBrokenLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "!r:x.000001.jsonl")
	os.WriteFile(path, []byte(`{"format":"zooid-trace","version":99,"room":"!r:x","segment":1}`+"\n"), 0o600)
	if _, err := trace.Read(dir); err == nil || !strings.Contains(err.Error(), ":1: trace format version 99") {
		t.Fatalf("Read of a version-99 file: %v", err)
	}
	os.WriteFile(path, []byte(`{"format":"zooid-trace","version":1,"room":"!r:x","segment":1}`+"\nnot json\n{\"seq\":2}\n"), 0o600)
	if _, err := trace.Read(dir); err == nil || !strings.Contains(err.Error(), ":2: ") {
		t.Fatalf("Read of a file broken on line 2: %v", err)
	}
	// A torn last line is what a crash mid-write leaves: the rest is kept.
	os.WriteFile(path, []byte(`{"format":"zooid-trace","version":1,"room":"!r:x","segment":1}`+"\n{\"seq\":1,\"kind\":\"start\",\"room\":\"!r:x\",\"start\":{}}\n{\"seq\":2,\"ki"), 0o600)
	tr, err := trace.Read(dir)
	if err != nil || len(tr.Rooms[0].Records) != 1 {
		t.Fatalf("Read of a torn file: %v, %+v", err, tr)
	}
}

// A record Compare cannot read would come out as differences the daemon
// never made; Read refuses it with its file and line instead.
func TestReadRefusesUnknownKindsAndCutRecords(t *testing.T) {
	hdr := `{"format":"zooid-trace","version":1,"room":"!r:x","segment":1}` + "\n"
	start := `{"seq":1,"kind":"start","room":"!r:x","start":{}}` + "\n"
	for name, tc := range map[string]struct{ body, want string }{
		"unknown kind":        {start + `{"seq":2,"kind":"telepathy","room":"!r:x"}` + "\n", `:3: unknown trace record kind "telepathy"`},
		"no kind":             {start + `{"seq":2,"room":"!r:x"}` + "\n", ":3: a trace record has a kind"},
		"event without event": {start + `{"seq":2,"kind":"event","room":"!r:x"}` + "\n", `:3: a "event" record without its "event" field`},
		"broken whole line":   {start + `{"seq":2,"kind":"ev` + "\n", ":3: "},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "!r:x.000001.jsonl")
			os.WriteFile(path, []byte(hdr+tc.body), 0o600)
			_, err := trace.Read(dir)
			if err == nil || !strings.Contains(err.Error(), path+tc.want) {
				t.Fatalf("Read: %v, want an error containing %q", err, path+tc.want)
			}
		})
	}
}

// Only the newest segment may end torn: an older one was finished when the
// writer rotated, so a cut there is damage, not a crash.
func TestReadRefusesATornOlderSegment(t *testing.T) {
	dir := t.TempDir()
	one := filepath.Join(dir, "!r:x.000001.jsonl")
	os.WriteFile(one, []byte(`{"format":"zooid-trace","version":1,"room":"!r:x","segment":1}`+"\n"+`{"seq":1,"kind":"start","room":"!r:x","start":{}}`+"\n"+`{"seq":2,"ki`), 0o600)
	os.WriteFile(filepath.Join(dir, "!r:x.000002.jsonl"), []byte(`{"format":"zooid-trace","version":1,"room":"!r:x","segment":2}`+"\n"+`{"seq":3,"kind":"start","room":"!r:x","start":{}}`+"\n"), 0o600)
	if _, err := trace.Read(dir); err == nil || !strings.Contains(err.Error(), one+":3: the last line is cut short") {
		t.Fatalf("Read of a torn older segment: %v", err)
	}
}

// Txn, attempt and internal turn ids made by crypto/rand.Text (base32, 26
// characters) and the MCP send's hex txn ids differ from run to run too.
func TestCompareMapsRandomTextIDs(t *testing.T) {
	ids := map[string][3]string{
		"1": {"zooid-ABCDEFGHIJKLMNOPQRSTUVWXY2", "ztABCDEFGHIJKLMNOPQRSTUVWXY2", "zooid-mcp-00112233445566778899aabbccddeeff"},
		"2": {"zooid-Z7Z7Z7Z7Z7Z7Z7Z7Z7Z7Z7Z7Z3", "ztQ3Q3Q3Q3Q3Q3Q3Q3Q3Q3Q3Q3Q3", "zooid-mcp-ffeeddccbbaa99887766554433221100"},
	}
	runWith := func(suffix string) *trace.Trace {
		return read(t, run(t, suffix, func(recs []trace.Record) []trace.Record {
			for i := range recs {
				if recs[i].Post != nil {
					recs[i].Post.TxnID = ids[suffix][0]
					extra := *recs[i].Post
					extra.TxnID, extra.ID = ids[suffix][2], id.EventID("$sent0000"+suffix)
					recs = append(recs, trace.Record{Kind: trace.KindPost, Room: recs[i].Room, Post: &extra},
						trace.Record{Kind: trace.KindTask, Room: recs[i].Room, Task: &trace.TaskStep{Step: trace.StepAdmitted, Agent: "agent-b", Caller: "agent-a", Attempt: ids[suffix][1]}})
					break
				}
			}
			return recs
		}))
	}
	if d := trace.Compare(runWith("1"), runWith("2")); len(d) != 0 {
		t.Fatalf("want no diff between runs that differ only in random ids, got:\n%s", d)
	}
}

func TestWriterConcurrentRoomsKeepOrder(t *testing.T) {
	dir := t.TempDir()
	w, err := trace.Open(trace.Options{Dir: dir, MaxFileSize: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			room := id.RoomID(fmt.Sprintf("!r%d:x", g%2))
			for i := 0; i < 100; i++ {
				w.Record(trace.Record{Room: room, Kind: trace.KindPost, Post: &trace.Post{Sender: "@a:x", Text: "t"}})
			}
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tr := read(t, dir)
	if len(tr.Rooms) != 2 {
		t.Fatalf("%d rooms, want 2", len(tr.Rooms))
	}
	for _, r := range tr.Rooms {
		if len(r.Records) != 400 {
			t.Fatalf("room %s: %d records, want 400", r.ID, len(r.Records))
		}
		for i, rec := range r.Records {
			if rec.Seq != uint64(i+1) {
				t.Fatalf("room %s: record %d has seq %d", r.ID, i, rec.Seq)
			}
		}
	}
}
