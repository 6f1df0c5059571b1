package trace_test

import (
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/zooid/trace"
)

// BenchmarkWriterPrompt is the cost of recording one prompt of 300 bytes:
// encode, scrub two secrets, one write(2). No fsync (prompts don't sync).
func BenchmarkWriterPrompt(b *testing.B) {
	w, err := trace.Open(trace.Options{Dir: b.TempDir(), Secrets: []string{"as_token_0123456789", "hs_token_0123456789"}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	rec := trace.Record{Room: "!room:example.org", Kind: trace.KindPrompt, Session: "agent-a|!room:example.org|$root",
		Prompt: &trace.Prompt{Agent: "agent-a", Turn: "$event", Trigger: "$event", Text: strings.Repeat("check svc-a ", 25)}}
	b.ReportAllocs()
	for b.Loop() {
		w.Record(rec)
	}
}

// BenchmarkWriterTurnEnd is the cost of the record that ends a turn: it is
// fsync'd, so this is the disk's sync latency.
func BenchmarkWriterTurnEnd(b *testing.B) {
	w, err := trace.Open(trace.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	rec := trace.Record{Room: "!room:example.org", Kind: trace.KindTurnEnd, Session: "agent-a|!room:example.org|$root",
		TurnEnd: &trace.TurnEnd{Agent: "agent-a", Turn: "$event", Stop: "end_turn"}}
	b.ReportAllocs()
	for b.Loop() {
		w.Record(rec)
	}
}

// BenchmarkOff is what a hook costs when tracing is off.
func BenchmarkOff(b *testing.B) {
	rec := trace.Record{Room: "!room:example.org", Kind: trace.KindTurnEnd, TurnEnd: &trace.TurnEnd{Agent: "agent-a"}}
	r := trace.Or(nil)
	b.ReportAllocs()
	for b.Loop() {
		r.Record(rec)
	}
}
