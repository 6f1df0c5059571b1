package matrix

import (
	"encoding/json"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/trace"
)

// tracePost is the trace record of one Send. Building it encodes the content,
// so it is skipped when tracing is off.
func tracePost(rec trace.Recorder, as id.UserID, room id.RoomID, evType event.Type, content any, txnID string, evID id.EventID, err error) trace.Record {
	if !rec.Enabled() {
		return trace.Record{}
	}
	var c struct {
		MsgType   string           `json:"msgtype"`
		Body      any              `json:"body"`
		RelatesTo *event.RelatesTo `json:"m.relates_to"`
	}
	if raw, merr := json.Marshal(content); merr == nil {
		_ = json.Unmarshal(raw, &c)
	}
	p := &trace.Post{ID: evID, Sender: as, Type: evType.Type, MsgType: c.MsgType, TxnID: txnID}
	if s, ok := c.Body.(string); ok {
		p.Text = s
	}
	p.Thread = c.RelatesTo.GetThreadParent()
	if err != nil {
		p.Error = err.Error()
	}
	return trace.Record{Kind: trace.KindPost, Room: room, Post: p}
}
