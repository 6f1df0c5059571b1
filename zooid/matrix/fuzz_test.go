package matrix

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzPushTransaction puts arbitrary bodies to the appservice push endpoint:
// a body that is not a transaction is refused with 400 M_NOT_JSON and records
// nothing; one that is gets 200, and every event it carried is in the inbox
// (each decodes or is dropped by the dispatcher, never a panic).
func FuzzPushTransaction(f *testing.F) {
	for _, s := range []string{`{"events":[]}`, `{}`, `{not json`, ``, `null`, `{"events":null}`, `{"events":[{}]}`,
		`{"events":[{"type":"m.room.message","room_id":"!r:hs","event_id":"$1","sender":"@ori:hs","content":{"body":"@agent-a hi","msgtype":"m.text"}}]}`,
		`{"events":[1,"x",null,[]]}`, `{"events":{}}`} {
		f.Add(s)
	}
	st, err := openStore(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.close() })
	tr := &Transport{opts: Options{HSToken: "hs-token"}, store: st, log: slog.New(slog.DiscardHandler), wake: make(chan struct{}, 1)}
	h := tr.pushHandler()
	n := 0
	f.Fuzz(func(t *testing.T, body string) {
		n++
		before, err := st.pendingAfter(0)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPut, "/_matrix/app/v1/transactions/fuzz-"+itoa(n), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer hs-token")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		after, err := st.pendingAfter(0)
		if err != nil {
			t.Fatal(err)
		}
		var txn struct {
			Events []json.RawMessage `json:"events"`
		}
		valid := json.Unmarshal([]byte(body), &txn) == nil
		switch {
		case !valid && (rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "M_NOT_JSON")):
			t.Fatalf("refused body %q answered %d %s, want 400 M_NOT_JSON", body, rec.Code, rec.Body)
		case !valid && len(after) != len(before):
			t.Fatalf("refused body %q recorded %d events", body, len(after)-len(before))
		case valid && rec.Code != http.StatusOK:
			t.Fatalf("transaction %q answered %d %s, want 200", body, rec.Code, rec.Body)
		}
		for _, p := range after[len(before):] {
			_, _ = decodeEvent(p.rec)
		}
		// Drain so the inbox stays small across execs.
		for _, p := range after {
			if err := st.done(p.seq); err != nil {
				t.Fatal(err)
			}
		}
		_, _ = io.Copy(io.Discard, rec.Body)
	})
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
